// The subcommands of the tessera CLI. Each returns the process exit code.
#pragma once

namespace tessera {

int RunGenerateCommand(int argc, char** argv);
int RunTokenizeCommand(int argc, char** argv);
int RunDetokenizeCommand(int argc, char** argv);
int RunRenderChatCommand(int argc, char** argv);
int RunChatCommand(int argc, char** argv);
int RunBenchCommand(int argc, char** argv);
int RunSynthCommand(int argc, char** argv);
int RunServeCommand(int argc, char** argv);
int RunPullCommand(int argc, char** argv);
int RunConvertCommand(int argc, char** argv);
int RunListCommand(int argc, char** argv);
int RunRmCommand(int argc, char** argv);
int RunResolveCommand(int argc, char** argv);
int RunDoctorCommand(int argc, char** argv);
int RunVersionCommand(int argc, char** argv);
// Hidden: the inference worker process that `serve` starts.
int RunWorkerCommand(int argc, char** argv);

}  // namespace tessera
