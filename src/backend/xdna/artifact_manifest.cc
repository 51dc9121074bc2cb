#include "backend/xdna/artifact_manifest.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/sha256.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxNameChars = 128;
constexpr size_t kMaxPathChars = 512;
constexpr size_t kMaxArguments = 64;
constexpr size_t kMaxShapes = 64;
constexpr size_t kMaxDims = 8;
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr size_t kMaxContractChars = 1024;

Status Bad(const std::string& where, const std::string& what) {
  return Corrupt("NPU artifact manifest: " + where + ": " + what);
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

Expected<std::string> String(const json& obj, const std::string& key, const std::string& where,
                             size_t max_chars) {
  auto it = obj.find(key);
  if (it == obj.end()) return Bad(where, "missing field '" + key + "'");
  if (!it->is_string()) return Bad(where, "field '" + key + "' must be a string");
  std::string s = it->get<std::string>();
  if (s.empty() || s.size() > max_chars) {
    return Bad(where,
               "field '" + key + "' must have 1 to " + std::to_string(max_chars) + " characters");
  }
  return s;
}

Status CheckKnownFields(const json& obj, const std::set<std::string>& known,
                        const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!known.count(it.key())) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return Bad(where, "unknown field '" + it.key() + "' (known: " + list + ")");
    }
  }
  return Status::Ok();
}

Expected<std::string> Sha256Field(const json& obj, const std::string& key,
                                  const std::string& where) {
  TS_ASSIGN_OR_RETURN(std::string s, String(obj, key, where, 64));
  bool hex = s.size() == 64;
  for (char c : s) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex) return Bad(where, "field '" + key + "' must be 64 lowercase hex digits");
  return s;
}

// A relative path that stays inside the directory: no absolute paths, no "..", no empty parts.
Status CheckRelativePath(const std::string& path, const std::string& where,
                         const std::string& key) {
  if (path.empty() || path.size() > kMaxPathChars) {
    return Bad(where,
               key + " must be a path of 1 to " + std::to_string(kMaxPathChars) + " characters");
  }
  if (path.front() == '/')
    return Bad(where, key + " '" + path + "' is absolute; use a path relative to the manifest");
  if (path.find('\\') != std::string::npos || path.find('\0') != std::string::npos) {
    return Bad(where, key + " '" + path + "' contains a backslash or NUL");
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return Bad(where, key + " '" + path + "' has a '" + std::string(part) +
                            "' component; paths must stay inside the manifest's directory");
    }
    start = end + 1;
  }
  return Status::Ok();
}

// Resolves `rel` under `root` (canonical) and refuses anything that leaves it (symlinks too).
Expected<std::string> ResolveInside(const fs::path& root, const std::string& rel,
                                    const std::string& where, const std::string& key) {
  std::error_code ec;
  fs::path canonical = fs::canonical(root / rel, ec);
  if (ec) {
    return NotFound("NPU artifact manifest: " + where + ": " + key + " '" + rel +
                    "' does not exist in " + root.string() + " (" + ec.message() + ")");
  }
  std::string c = canonical.string(), r = root.string();
  if (c.size() <= r.size() || c.compare(0, r.size(), r) != 0 || c[r.size()] != '/') {
    return Bad(where, key + " '" + rel + "' resolves to " + c + ", outside " + r +
                          " (a symlink escaping the directory?)");
  }
  if (!fs::is_regular_file(canonical, ec)) {
    return Bad(where, key + " '" + rel + "' is not a regular file");
  }
  return c;
}

Expected<std::vector<uint8_t>> ReadBounded(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open '" + path + "'");
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) return IoError("cannot read '" + path + "'");
  if (static_cast<uint64_t>(size) > max_bytes) {
    return ResourceExhausted("'" + path + "' has " + std::to_string(size) + " bytes (at most " +
                             std::to_string(max_bytes) + ")");
  }
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (!bytes.empty() && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    return IoError("cannot read '" + path + "'");
  }
  return bytes;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

Expected<std::map<std::string, std::vector<int64_t>>> ParseShapes(const json& j,
                                                                  const std::string& where) {
  if (!j.is_object()) return Bad(where, "field 'shapes' must be an object of name -> dims");
  if (j.size() > kMaxShapes) return Bad(where, "field 'shapes' has more than 64 entries");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto it = j.begin(); it != j.end(); ++it) {
    std::vector<int64_t> dims;
    const json& v = *it;
    auto dim = [&](const json& d) -> Status {
      if (!d.is_number_integer()) {
        return Bad(where, "shape '" + it.key() + "' must be an integer or a list of integers");
      }
      int64_t x = d.get<int64_t>();
      if (x < 0 || x > kMaxDim) {
        return Bad(where, "shape '" + it.key() + "' has dimension " + std::to_string(x) +
                              " outside [0, 2^40]");
      }
      dims.push_back(x);
      return Status::Ok();
    };
    if (v.is_array()) {
      if (v.size() > kMaxDims) return Bad(where, "shape '" + it.key() + "' has more than 8 dims");
      for (const auto& d : v) TS_RETURN_IF_ERROR(dim(d));
    } else {
      TS_RETURN_IF_ERROR(dim(v));
    }
    shapes[it.key()] = std::move(dims);
  }
  return shapes;
}

// Parses one entry of "programs" (the stated fields only).
Expected<NpuProgramArtifact> ParseProgram(const json& j, size_t index) {
  std::string where = "programs[" + std::to_string(index) + "]";
  if (!j.is_object()) return Bad(where, "must be an object");
  TS_RETURN_IF_ERROR(
      CheckKnownFields(j,
                       {"name", "target", "kernel", "xclbin", "xclbin_sha256", "insts",
                        "insts_sha256", "arguments", "shapes", "dtype", "numeric_contract"},
                       where));
  NpuProgramArtifact p;
  TS_ASSIGN_OR_RETURN(p.name, String(j, "name", where, kMaxNameChars));
  for (char c : p.name) {
    if (!IsNameChar(c)) return Bad(where, "name '" + p.name + "' may use only [A-Za-z0-9_.-]");
  }
  where = "program '" + p.name + "'";
  TS_ASSIGN_OR_RETURN(std::string target, String(j, "target", where, 16));
  auto generation = ParseGeneration(target);
  if (!generation) return Bad(where, "field 'target': " + generation.status().message());
  p.target = *generation;
  TS_ASSIGN_OR_RETURN(p.kernel, String(j, "kernel", where, 63));
  TS_ASSIGN_OR_RETURN(p.xclbin, String(j, "xclbin", where, kMaxPathChars));
  TS_ASSIGN_OR_RETURN(p.xclbin_sha256, Sha256Field(j, "xclbin_sha256", where));
  TS_ASSIGN_OR_RETURN(p.insts, String(j, "insts", where, kMaxPathChars));
  TS_ASSIGN_OR_RETURN(p.insts_sha256, Sha256Field(j, "insts_sha256", where));
  TS_RETURN_IF_ERROR(CheckRelativePath(p.xclbin, where, "xclbin"));
  TS_RETURN_IF_ERROR(CheckRelativePath(p.insts, where, "insts"));
  auto args = j.find("arguments");
  if (args == j.end()) return Bad(where, "missing field 'arguments'");
  if (!args->is_array() || args->empty() || args->size() > kMaxArguments) {
    return Bad(where, "field 'arguments' must be a list of 1 to 64 argument names");
  }
  for (const auto& a : *args) {
    if (!a.is_string() || a.get<std::string>().empty() || a.get<std::string>().size() > 64) {
      return Bad(where, "field 'arguments' must hold names of 1 to 64 characters");
    }
    p.arguments.push_back(a.get<std::string>());
  }
  auto shapes = j.find("shapes");
  if (shapes == j.end()) return Bad(where, "missing field 'shapes'");
  TS_ASSIGN_OR_RETURN(p.shapes, ParseShapes(*shapes, where));
  TS_ASSIGN_OR_RETURN(p.dtype, String(j, "dtype", where, 32));
  for (char c : p.dtype) {
    if (!IsNameChar(c)) return Bad(where, "dtype '" + p.dtype + "' may use only [A-Za-z0-9_.-]");
  }
  TS_ASSIGN_OR_RETURN(p.numeric_contract, String(j, "numeric_contract", where, kMaxContractChars));
  return p;
}

// Reads, hashes and parses the program's files, then cross-checks them.
Status VerifyProgram(const fs::path& root, NpuProgramArtifact& p, const NpuTarget& target) {
  const std::string where = "program '" + p.name + "'";
  TS_ASSIGN_OR_RETURN(p.xclbin_path, ResolveInside(root, p.xclbin, where, "xclbin"));
  TS_ASSIGN_OR_RETURN(p.insts_path, ResolveInside(root, p.insts, where, "insts"));

  TS_ASSIGN_OR_RETURN(std::vector<uint8_t> xclbin,
                      ReadBounded(p.xclbin_path, kArtifactMaxFileBytes));
  std::string digest =
      Sha256Hex(std::string_view(reinterpret_cast<const char*>(xclbin.data()), xclbin.size()));
  if (digest != p.xclbin_sha256) {
    return Bad(where, "xclbin '" + p.xclbin + "' has sha256 " + digest + ", the manifest says " +
                          p.xclbin_sha256 + " (file changed or manifest stale)");
  }
  TS_ASSIGN_OR_RETURN(std::vector<uint8_t> insts, ReadBounded(p.insts_path, kTxnMaxBytes));
  digest = Sha256Hex(std::string_view(reinterpret_cast<const char*>(insts.data()), insts.size()));
  if (digest != p.insts_sha256) {
    return Bad(where, "insts '" + p.insts + "' has sha256 " + digest + ", the manifest says " +
                          p.insts_sha256 + " (file changed or manifest stale)");
  }
  auto xinfo = ParseXclbin(xclbin);
  if (!xinfo) return xinfo.status().WithContext(where + ": xclbin '" + p.xclbin + "'");
  p.xclbin_info = std::move(*xinfo);
  auto tinfo = ParseTxnHeader(insts);
  if (!tinfo) return tinfo.status().WithContext(where + ": insts '" + p.insts + "'");
  p.insts_info = *tinfo;

  const XclbinKernel* kernel = p.xclbin_info.FindKernel(p.kernel);
  if (kernel == nullptr) {
    return Bad(where, "kernel '" + p.kernel + "' is not in xclbin '" + p.xclbin + "' (it has " +
                          Join(p.xclbin_info.KernelNames()) + ")");
  }
  if (!kernel->has_metadata) {
    return Bad(where, "xclbin '" + p.xclbin + "' has no EMBEDDED_METADATA arguments for kernel '" +
                          p.kernel + "', so its argument list cannot be checked");
  }
  std::vector<std::string> xclbin_args = ArgNames(kernel->args);
  if (xclbin_args != p.arguments) {
    return Bad(where, "arguments " + Join(p.arguments) + " differ from kernel '" + p.kernel +
                          "' in the xclbin: " + Join(xclbin_args));
  }
  const NpuTarget& declared = NpuTargetFor(p.target);
  if (p.insts_info.device_generation != declared.txn_device_generation) {
    return Bad(where, "declares target " + std::string(GenerationName(p.target)) + " but insts '" +
                          p.insts + "' was compiled for " +
                          TxnGenerationName(p.insts_info.device_generation));
  }
  if (p.target != target.generation) {
    return Unsupported("NPU artifact manifest: " + where + " targets " +
                       TxnGenerationName(declared.txn_device_generation) + " but the device is " +
                       TxnGenerationName(target.txn_device_generation) +
                       "; use the artifacts built for " +
                       std::string(GenerationName(target.generation)));
  }
  Status fits = CheckTxnForTarget(p.insts_info, target);
  if (!fits.ok()) return fits.WithContext("NPU artifact manifest: " + where);
  if (p.xclbin_info.aie_partition &&
      p.xclbin_info.aie_partition->column_width > static_cast<uint16_t>(target.columns)) {
    return Unsupported("NPU artifact manifest: " + where + ": xclbin '" + p.xclbin +
                       "' needs a partition of " +
                       std::to_string(p.xclbin_info.aie_partition->column_width) + " columns; " +
                       std::string(GenerationName(target.generation)) + " offers " +
                       std::to_string(target.columns));
  }
  return Status::Ok();
}

}  // namespace

const NpuProgramArtifact* ArtifactManifest::Find(std::string_view name) const {
  for (const auto& p : programs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Expected<ArtifactManifest> LoadArtifactManifest(const std::string& dir, const NpuTarget& target) {
  std::error_code ec;
  fs::path root = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(root, ec)) {
    return NotFound("NPU artifact directory '" + dir + "' does not exist");
  }
  // The manifest itself must not be a symlink out of the directory either.
  TS_ASSIGN_OR_RETURN(const std::string manifest_path,
                      ResolveInside(root, std::string(kArtifactManifestFile),
                                    "directory '" + root.string() + "'", "manifest"));
  TS_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadBounded(manifest_path, kManifestMaxBytes));
  json j = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad(manifest_path, "not valid JSON");
  if (!j.is_object()) return Bad(manifest_path, "the top level must be an object");
  TS_RETURN_IF_ERROR(CheckKnownFields(j, {"format", "version", "programs"}, manifest_path));
  TS_ASSIGN_OR_RETURN(std::string format, String(j, "format", manifest_path, 64));
  if (format != kArtifactManifestFormat) {
    return Bad(manifest_path, "field 'format' is '" + format + "', expected '" +
                                  std::string(kArtifactManifestFormat) + "'");
  }
  auto version = j.find("version");
  if (version == j.end()) return Bad(manifest_path, "missing field 'version'");
  if (!version->is_number_integer() || version->get<int64_t>() != kArtifactManifestVersion) {
    return Unsupported("NPU artifact manifest: " + manifest_path + ": field 'version' is " +
                       version->dump(-1, ' ', false, json::error_handler_t::replace) +
                       "; this tessera reads version " + std::to_string(kArtifactManifestVersion) +
                       " (upgrade tessera or regenerate the manifest)");
  }
  auto programs = j.find("programs");
  if (programs == j.end()) return Bad(manifest_path, "missing field 'programs'");
  if (!programs->is_array() || programs->size() > kManifestMaxPrograms) {
    return Bad(manifest_path, "field 'programs' must be a list of at most " +
                                  std::to_string(kManifestMaxPrograms) + " programs");
  }
  ArtifactManifest manifest;
  manifest.dir = root.string();
  std::set<std::string> names;
  for (size_t i = 0; i < programs->size(); ++i) {
    auto program = ParseProgram((*programs)[i], i);
    if (!program) return program.status();
    if (!names.insert(program->name).second) {
      return Bad(manifest_path, "two programs are named '" + program->name + "'");
    }
    TS_RETURN_IF_ERROR(VerifyProgram(root, *program, target));
    manifest.programs.push_back(std::move(*program));
  }
  return manifest;
}

std::string ArtifactManifestJson(const std::vector<NpuProgramArtifact>& programs) {
  json list = json::array();
  for (const auto& p : programs) {
    json shapes = json::object();
    for (const auto& [name, dims] : p.shapes) {
      shapes[name] = dims.size() == 1 ? json(dims[0]) : json(dims);
    }
    list.push_back({{"name", p.name},
                    {"target", std::string(GenerationName(p.target))},
                    {"kernel", p.kernel},
                    {"xclbin", p.xclbin},
                    {"xclbin_sha256", p.xclbin_sha256},
                    {"insts", p.insts},
                    {"insts_sha256", p.insts_sha256},
                    {"arguments", p.arguments},
                    {"shapes", shapes},
                    {"dtype", p.dtype},
                    {"numeric_contract", p.numeric_contract}});
  }
  json j = {{"format", std::string(kArtifactManifestFormat)},
            {"version", kArtifactManifestVersion},
            {"programs", list}};
  return j.dump(2) + "\n";
}

namespace {
Status WriteFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return IoError("cannot create '" + path + "'");
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) return IoError("cannot write '" + path + "'");
  return Status::Ok();
}
}  // namespace

Status WriteProgramFiles(const std::string& dir, NpuProgramArtifact& program,
                         const std::vector<uint8_t>& xclbin_bytes,
                         const std::vector<uint8_t>& insts_bytes) {
  TS_RETURN_IF_ERROR(CheckRelativePath(program.xclbin, "program '" + program.name + "'", "xclbin"));
  TS_RETURN_IF_ERROR(CheckRelativePath(program.insts, "program '" + program.name + "'", "insts"));
  TS_RETURN_IF_ERROR(WriteFile((fs::path(dir) / program.xclbin).string(), xclbin_bytes.data(),
                               xclbin_bytes.size()));
  TS_RETURN_IF_ERROR(
      WriteFile((fs::path(dir) / program.insts).string(), insts_bytes.data(), insts_bytes.size()));
  program.xclbin_sha256 = Sha256Hex(
      std::string_view(reinterpret_cast<const char*>(xclbin_bytes.data()), xclbin_bytes.size()));
  program.insts_sha256 = Sha256Hex(
      std::string_view(reinterpret_cast<const char*>(insts_bytes.data()), insts_bytes.size()));
  return Status::Ok();
}

Status WriteArtifactManifest(const std::string& dir,
                             const std::vector<NpuProgramArtifact>& programs) {
  std::string text = ArtifactManifestJson(programs);
  return WriteFile((fs::path(dir) / std::string(kArtifactManifestFile)).string(), text.data(),
                   text.size());
}

}  // namespace tessera
