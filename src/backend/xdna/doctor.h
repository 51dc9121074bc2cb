// Doctor: finds the machine's Ryzen AI NPUs and checks what an XDNA backend needs (driver,
// firmware, IOMMU, device-node access, memlock, XRT + its NPU plugin) from a filesystem root,
// so tests run it on fake sysfs trees they build (facts and sources: FACTS.md section 4).
// Library only: nothing is printed; `tessera doctor` and the server format the report.
//
//   DoctorOptions options;                 // root "/", this process's uid/groups and rlimit
//   options.model_bytes = *DirectoryBytes(model_dir);
//   DoctorReport report = RunDoctor(options);
//   if (!report.ok()) { ... report.checks[i].fix says what to do ... }
//   report.devices[0].generation           // XdnaGeneration::kXdna2
//   std::string json = DoctorReportJson(report);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/xdna/npu_target.h"
#include "base/status.h"

namespace tessera {

struct DoctorOptions {
  std::string root = "/";    // every path is looked up under it (tests: a fake tree)
  uint64_t model_bytes = 0;  // what the model will pin; the memlock need adds 512 MiB headroom
  // Test overrides; unset: this process's RLIMIT_MEMLOCK (soft limit; CAP_IPC_LOCK counts as
  // unlimited), getuid() and getgid() + getgroups().
  std::optional<uint64_t> memlock_limit;  // kMemlockUnlimited for "unlimited"
  std::optional<uint32_t> uid;
  std::optional<std::vector<uint32_t>> gids;
};

inline constexpr uint64_t kMemlockUnlimited = UINT64_MAX;
inline constexpr uint64_t kMemlockHeadroomBytes = 512ull << 20;  // as FastFlowLM sizes it

// One NPU found under sys/class/accel or sys/bus/pci/devices.
struct NpuDevice {
  std::string accel;                         // "accel0"; empty when no driver created a node
  std::string pci_address;                   // "0000:c5:00.1"
  std::string pci_id;                        // "1022:17f0"
  std::string revision;                      // "0x11"
  std::optional<XdnaGeneration> generation;  // unset: an id/revision tessera does not support
  std::string name;            // "Strix Halo", "Phoenix / Hawk Point", "unknown (...)"
  int columns = 0;             // from NpuTargetFor(generation); 0 when unsupported
  std::string vbnv;            // the driver's board name attribute, if any
  std::string fw_version;      // "1.1.2.65"; empty when the driver reports none
  std::string driver;          // the bound driver's name ("amdxdna"); empty when none
  std::string driver_version;  // sys/module/amdxdna/version, "in-tree", or empty
  std::string firmware_file;   // the firmware file found, relative to root; empty when none
};

// kInfo: nothing to fix, only to know (no NPU on this machine, so nothing else was checked).
// The order is severity: a combined check takes the worst.
enum class CheckStatus { kPass, kInfo, kWarn, kFail };
std::string_view CheckStatusName(CheckStatus status);  // "pass" / "info" / "warn" / "fail"

struct DoctorCheck {
  std::string name;  // one of DoctorCheckNames(), always all of them, in that order
  CheckStatus status = CheckStatus::kPass;
  std::string detail;  // what was found
  std::string fix;     // the command or file change that fixes it; empty when it passes
};

struct DoctorReport {
  std::vector<NpuDevice> devices;      // supported NPUs, in discovery order
  std::vector<NpuDevice> unsupported;  // accel/PCI devices with ids tessera does not support
  std::vector<DoctorCheck> checks;
  // sys/module/amdxdna/parameters/tdr_timeout_ms (out-of-tree driver only): the budget the
  // backend gives one command before the driver's timeout detection would fire.
  std::optional<int64_t> tdr_timeout_ms;
  bool ok() const;  // no check failed (a machine without an NPU is ok: the CPU backend runs)
  const DoctorCheck* Find(std::string_view check_name) const;
};

// "npu_present", "driver", "firmware", "iommu", "device_access", "memlock", "xrt".
const std::vector<std::string>& DoctorCheckNames();

// Never fails: unreadable or malformed files become warn/fail checks that say so.
DoctorReport RunDoctor(const DoctorOptions& options);

// {"devices": [...], "checks": [...]} with fixed key order, indented 2: the same report gives
// the same bytes. Unsupported devices are described by npu_present, not listed.
std::string DoctorReportJson(const DoctorReport& report);
// A table for people: devices, then one row per check with its fix under it.
std::string DoctorReportText(const DoctorReport& report);

// The bytes of the regular files under `dir` (recursive, symlinks followed, bounded), as the
// memlock need of a model directory.
Expected<uint64_t> DirectoryBytes(const std::string& dir);

}  // namespace tessera
