#include "backend/xdna/doctor.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "backend/xdna/sysfs_files.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using sysfs::Hex;
using sysfs::IsDottedNumbers;
using sysfs::IsPrintableText;
using sysfs::ListDir;
using sysfs::ParseDecimal;
using sysfs::ParseHexId;
using sysfs::ReadSmallFile;
using sysfs::Shown;
using sysfs::Trim;

constexpr size_t kCmdlineCap = 16 * 1024;  // the kernel caps its command line well below
constexpr size_t kGroupFileCap = 1 << 20;  // /etc/group
constexpr uint16_t kAmdVendor = 0x1022;

std::string MiB(uint64_t bytes) {
  if (bytes == kMemlockUnlimited) return "unlimited";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// --- discovery ---

// A device as read from sysfs, before it is judged.
struct Found {
  NpuDevice device;
  fs::path pci_dir;
  std::string firmware_dir;  // "17f0_10"; empty when unsupported
  std::string problem;       // why it could not be identified
};

std::string Label(const NpuDevice& d) {
  return d.accel.empty() ? d.pci_address : d.accel + " (" + d.pci_address + ")";
}

// Names a device by its PCI id and revision (FACTS.md section 4).
void Identify(Found& f, uint32_t vendor, uint32_t device, uint32_t revision) {
  NpuDevice& d = f.device;
  d.pci_id = Hex(vendor, 4) + ":" + Hex(device, 4);
  d.revision = "0x" + Hex(revision, 2);
  if (vendor != kAmdVendor) {
    d.name = "unknown (not an AMD NPU)";
    return;
  }
  if (device == 0x1502 && revision == 0x00) {
    d.generation = XdnaGeneration::kXdna1;
    // Phoenix and Hawk Point share id and revision; only the driver's board name can differ.
    std::string vbnv = d.vbnv;
    std::transform(vbnv.begin(), vbnv.end(), vbnv.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    d.name = vbnv.find("hawk") != std::string::npos      ? "Hawk Point"
             : vbnv.find("phoenix") != std::string::npos ? "Phoenix"
                                                         : "Phoenix / Hawk Point";
    f.firmware_dir = "1502_00";
  } else if (device == 0x17f0 && (revision == 0x10 || revision == 0x11 || revision == 0x20)) {
    d.generation = XdnaGeneration::kXdna2;
    d.name = revision == 0x10 ? "Strix Point" : revision == 0x11 ? "Strix Halo" : "Krackan";
    f.firmware_dir = revision == 0x11 ? "17f0_11" : "17f0_10";  // Krackan loads Strix's
  } else {
    d.name = "unknown AMD device";
    return;
  }
  d.columns = NpuTargetFor(*d.generation).columns;
}

// Reads vendor/device/revision/vbnv/driver of one PCI device directory.
Found ReadPciDevice(const fs::path& pci_dir, std::string accel) {
  Found f;
  f.pci_dir = pci_dir;
  f.device.accel = std::move(accel);
  f.device.pci_address = pci_dir.filename().string();
  uint32_t ids[3] = {0, 0, 0};
  const char* attrs[3] = {"vendor", "device", "revision"};
  const uint32_t max[3] = {0xffff, 0xffff, 0xff};
  for (int i = 0; i < 3; ++i) {
    auto text = ReadSmallFile(pci_dir / attrs[i]);
    std::optional<uint32_t> v;
    if (text) v = ParseHexId(*text, max[i]);
    if (!v) {
      f.problem = text ? std::string(attrs[i]) + " holds " + Shown(Trim(*text)) +
                             ", expected a hex id such as " +
                             (i == 0   ? "0x1022"
                              : i == 1 ? "0x17f0"
                                       : "0x11")
                       : text.status().message();
      f.device.name = "unknown (unreadable PCI ids)";
      return f;
    }
    ids[i] = *v;
  }
  if (auto vbnv = ReadSmallFile(pci_dir / "vbnv"); vbnv && IsPrintableText(Trim(*vbnv))) {
    f.device.vbnv = Trim(*vbnv);
  }
  std::error_code ec;
  fs::path driver_link = pci_dir / "driver";
  if (fs::is_symlink(fs::symlink_status(driver_link, ec))) {
    f.device.driver = fs::read_symlink(driver_link, ec).filename().string();
  } else if (fs::exists(fs::symlink_status(driver_link, ec))) {
    f.device.driver = "?";  // junk: judged by the driver check
  }
  Identify(f, ids[0], ids[1], ids[2]);
  return f;
}

// accel0 < accel2 < accel10.
bool AccelLess(const std::string& a, const std::string& b) {
  auto num = [](const std::string& s) { return ParseDecimal(s.substr(5), 1 << 20).value_or(-1); };
  if (num(a) != num(b)) return num(a) < num(b);
  return a < b;
}

// Every accel node, then AMD NPUs on the PCI bus that no driver has claimed.
std::vector<Found> Discover(const fs::path& root) {
  std::vector<Found> found;
  std::set<std::string> seen;  // canonical PCI directories
  std::vector<std::string> accels;
  for (const std::string& name : ListDir(root / "sys/class/accel")) {
    if (name.rfind("accel", 0) == 0) accels.push_back(name);
  }
  std::sort(accels.begin(), accels.end(), AccelLess);
  for (const std::string& accel : accels) {
    fs::path link = root / "sys/class/accel" / accel / "device";
    std::error_code ec;
    fs::path pci_dir = fs::canonical(link, ec);
    if (ec || !fs::is_directory(pci_dir, ec)) {
      Found f;
      f.device.accel = accel;
      f.device.name = "unknown (no PCI device)";
      f.problem = fs::is_symlink(fs::symlink_status(link, ec))
                      ? "sys/class/accel/" + accel + "/device is a dangling symlink"
                      : "sys/class/accel/" + accel + "/device is missing or not a directory";
      found.push_back(std::move(f));
      continue;
    }
    seen.insert(pci_dir.string());
    found.push_back(ReadPciDevice(pci_dir, accel));
  }
  // Without amdxdna bound there is no accel node: look for the NPU ids on the bus itself.
  static constexpr std::array<uint32_t, 8> kNpuIds = {0x1502, 0x17f0, 0x17f1, 0x17f2,
                                                      0x17f3, 0x1b0a, 0x1b0b, 0x1b0c};
  for (const std::string& name : ListDir(root / "sys/bus/pci/devices")) {
    std::error_code ec;
    fs::path pci_dir = fs::canonical(root / "sys/bus/pci/devices" / name, ec);
    if (ec || seen.count(pci_dir.string()) || !fs::is_directory(pci_dir, ec)) continue;
    auto vendor = ReadSmallFile(pci_dir / "vendor");
    auto device = ReadSmallFile(pci_dir / "device");
    if (!vendor || !device || ParseHexId(*vendor, 0xffff) != kAmdVendor) continue;
    auto id = ParseHexId(*device, 0xffff);
    if (!id || std::find(kNpuIds.begin(), kNpuIds.end(), *id) == kNpuIds.end()) continue;
    seen.insert(pci_dir.string());
    found.push_back(ReadPciDevice(pci_dir, ""));
  }
  return found;
}

// --- checks ---

// One device's or the host's contribution to a check.
struct Finding {
  CheckStatus status = CheckStatus::kPass;
  std::string detail;
  std::string fix;
};

// Worst status wins; details and distinct fixes are joined.
DoctorCheck Combine(std::string name, const std::vector<Finding>& findings) {
  DoctorCheck check{std::move(name), CheckStatus::kPass, "", ""};
  std::vector<std::string> fixes;
  for (const Finding& f : findings) {
    check.status = std::max(check.status, f.status);
    if (!f.detail.empty()) check.detail += (check.detail.empty() ? "" : "; ") + f.detail;
    if (!f.fix.empty() && std::find(fixes.begin(), fixes.end(), f.fix) == fixes.end()) {
      fixes.push_back(f.fix);
    }
  }
  if (check.status != CheckStatus::kPass) {
    for (const std::string& fix : fixes) check.fix += (check.fix.empty() ? "" : "; ") + fix;
  }
  return check;
}

const char kModprobeFix[] =
    "sudo modprobe amdxdna (in the kernel since Linux 6.14; older kernels: build and install "
    "amd/xdna-driver)";
const char kCpuFallback[] = "tessera will use the CPU backend";

Finding NpuPresentCheck(const std::vector<Found>& found) {
  std::string supported, others;
  for (const Found& f : found) {
    const NpuDevice& d = f.device;
    std::string where = d.accel.empty() ? d.pci_address : d.accel;
    if (d.generation) {
      supported += (supported.empty() ? "" : ", ") + where + ": " + d.name + " (" +
                   std::string(GenerationName(*d.generation)) + ", " + d.pci_id + " rev " +
                   d.revision + ", " + std::to_string(d.columns) + " columns)";
    } else {
      others += (others.empty() ? "" : ", ") + where + ": " +
                (f.problem.empty() ? d.pci_id + " rev " + d.revision + " is " + d.name : f.problem);
    }
  }
  if (supported.empty() && others.empty()) {
    // Information, not a failure: most machines have no NPU and the CPU backend runs them.
    return {CheckStatus::kInfo, "no NPU found (nothing under sys/class/accel, no AMD NPU on PCI)",
            std::string("none needed if this machine has no Ryzen AI NPU: ") + kCpuFallback};
  }
  if (supported.empty()) {
    return {CheckStatus::kWarn, "no supported NPU; unknown or unsupported: " + others,
            std::string(kCpuFallback) +
                "; supported are 1022:1502 rev 0x00 (XDNA1) and 1022:17f0 rev 0x10/0x11/0x20 "
                "(XDNA2)"};
  }
  if (!others.empty()) {
    return {CheckStatus::kWarn,
            "found " + supported + "; ignored as unknown/unsupported: " + others,
            "none needed: tessera uses the supported NPU and ignores the others"};
  }
  return {CheckStatus::kPass, "found " + supported, ""};
}

Finding DriverCheck(const fs::path& root, Found& f, std::optional<int64_t>* tdr_timeout_ms) {
  NpuDevice& d = f.device;
  fs::path module = root / "sys/module/amdxdna";
  std::error_code ec;
  bool module_loaded = fs::is_directory(module, ec);
  Finding r;
  if (d.driver.empty()) {
    r.status = CheckStatus::kFail;
    if (module_loaded) {
      r.detail = Label(d) + ": amdxdna is loaded but not bound to the device";
      r.fix =
          "sudo modprobe -r amdxdna && sudo modprobe amdxdna, then read `sudo dmesg | grep "
          "amdxdna` (firmware or IOMMU errors: see those checks)";
    } else {
      r.detail = Label(d) + ": no driver bound and the amdxdna module is not loaded";
      r.fix = kModprobeFix;
    }
    return r;
  }
  if (d.driver != "amdxdna") {
    r.status = CheckStatus::kFail;
    r.detail = Label(d) + ": bound to " +
               (d.driver == "?" ? "nothing usable (driver is not a symlink)"
                                : Shown(d.driver) + ", not amdxdna");
    r.fix = d.driver == "?" ? kModprobeFix
                            : "echo " + d.pci_address + " | sudo tee /sys/bus/pci/drivers/" +
                                  d.driver + "/unbind && " + kModprobeFix;
    return r;
  }
  r.detail = Label(d) + ": amdxdna bound";
  if (module_loaded) {
    auto version = ReadSmallFile(module / "version");
    if (version && IsPrintableText(Trim(*version)) && Trim(*version).size() <= 64) {
      d.driver_version = Trim(*version);
      r.detail += ", version " + d.driver_version;
    } else if (version) {
      r.status = CheckStatus::kWarn;
      r.detail += ", sys/module/amdxdna/version holds " + Shown(Trim(*version));
      r.fix = "reinstall the amdxdna driver";
    } else if (version.status().code() != ErrorCode::kNotFound) {
      r.status = CheckStatus::kWarn;
      r.detail += ", sys/module/amdxdna/version unreadable: " + version.status().message();
      r.fix = "reinstall the amdxdna driver";
    } else {
      d.driver_version = "in-tree";
      r.detail += ", no version file (an in-tree module: its version is the kernel's";
      if (auto rel = ReadSmallFile(root / "proc/sys/kernel/osrelease");
          rel && IsPrintableText(Trim(*rel))) {
        r.detail += ", " + Shown(Trim(*rel), 64);
      }
      r.detail += ")";
    }
  } else {
    r.detail += " (no sys/module/amdxdna entry: built into the kernel)";
  }
  fs::path tdr = module / "parameters/tdr_timeout_ms";
  if (fs::exists(fs::symlink_status(tdr, ec))) {
    auto text = ReadSmallFile(tdr);
    auto ms = text ? ParseDecimal(*text, int64_t{1} << 31) : std::nullopt;
    if (ms) {
      if (!tdr_timeout_ms->has_value()) *tdr_timeout_ms = *ms;
      r.detail += ", tdr_timeout_ms " + std::to_string(*ms);
    } else {
      r.status = std::max(r.status, CheckStatus::kWarn);
      r.detail += ", tdr_timeout_ms unreadable (" +
                  (text ? "holds " + Shown(Trim(*text)) : text.status().message()) +
                  "): the backend uses its default command timeout";
      if (r.fix.empty())
        r.fix = "reload the driver: sudo modprobe -r amdxdna && sudo modprobe amdxdna";
    }
  }
  return r;
}

Finding FirmwareCheck(const fs::path& root, Found& f) {
  NpuDevice& d = f.device;
  Finding r;
  std::vector<std::string> notes;
  auto fw = ReadSmallFile(f.pci_dir / "fw_version");
  if (fw && IsDottedNumbers(Trim(*fw), 4)) {
    d.fw_version = Trim(*fw);
    notes.push_back("loaded firmware " + d.fw_version);
  } else if (fw || fw.status().code() != ErrorCode::kNotFound) {
    r.status = CheckStatus::kWarn;
    notes.push_back(
        "fw_version unreadable (" +
        (fw ? "holds " + Shown(Trim(*fw)) + ", expected a.b.c.d" : fw.status().message()) + ")");
  } else if (d.driver == "amdxdna") {
    r.status = CheckStatus::kWarn;
    notes.push_back(
        "the driver reports no fw_version (an older amdxdna; `xrt-smi examine` shows "
        "it)");
  }
  std::string dir = "lib/firmware/amdnpu/" + f.firmware_dir;
  for (const char* file : {"npu.sbin", "npu.sbin.zst", "npu_7.sbin", "npu_7.sbin.zst"}) {
    std::error_code ec;
    fs::path path = root / dir / file;
    if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0 && !ec) {
      d.firmware_file = dir + "/" + file;
      break;
    }
  }
  if (!d.firmware_file.empty()) {
    notes.push_back("file " + d.firmware_file);
  } else {
    notes.push_back("no non-empty npu.sbin, npu.sbin.zst or npu_7.sbin under " + dir);
    // Firmware that is running came from somewhere (an initramfs); a missing file then only
    // matters at the next driver load.
    r.status = d.fw_version.empty() ? CheckStatus::kFail : std::max(r.status, CheckStatus::kWarn);
    r.fix = "install the NPU firmware so that /" + dir +
            "/npu.sbin exists (a current linux-firmware package, or the firmware amd/xdna-driver "
            "installs), then reload: sudo modprobe -r amdxdna && sudo modprobe amdxdna";
  }
  r.detail = Label(d) + ": ";
  for (size_t i = 0; i < notes.size(); ++i) r.detail += (i ? ", " : "") + notes[i];
  if (r.status != CheckStatus::kPass && r.fix.empty()) {
    r.fix = "update amdxdna and the NPU firmware together (a stale npu.sbin aborts commands)";
  }
  return r;
}

const char kIommuFix[] =
    "enable the IOMMU (AMD-Vi / IOMMU in the firmware setup) and boot without amd_iommu=off or "
    "iommu=off: amdxdna binds the NPU through it (SVA)";

std::vector<Finding> IommuChecks(const fs::path& root, const std::vector<Found*>& devices) {
  std::vector<Finding> out;
  auto cmdline = ReadSmallFile(root / "proc/cmdline", kCmdlineCap);
  if (!cmdline) {
    out.push_back({CheckStatus::kWarn,
                   "kernel command line unreadable: " + cmdline.status().message(),
                   "run doctor where /proc is mounted"});
  } else {
    std::string text = *cmdline;
    std::replace_if(
        text.begin(), text.end(),
        [](char c) { return std::isspace(static_cast<unsigned char>(c)); }, ' ');
    std::vector<std::string> off;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find(' ', pos);
      if (end == std::string::npos) end = text.size();
      std::string token = text.substr(pos, end - pos);
      if (token == "amd_iommu=off" || token == "iommu=off") off.push_back(token);
      pos = end + 1;
    }
    if (!off.empty()) {
      std::string joined;
      for (const auto& t : off) joined += (joined.empty() ? "" : " and ") + t;
      out.push_back({CheckStatus::kFail, "the kernel command line has " + joined,
                     "remove " + joined +
                         " from the kernel command line (GRUB_CMDLINE_LINUX_DEFAULT in "
                         "/etc/default/grub, then sudo update-grub) and reboot"});
    } else {
      out.push_back({CheckStatus::kPass, "kernel command line leaves the IOMMU on", ""});
    }
  }
  std::vector<std::string> units = ListDir(root / "sys/class/iommu");
  if (units.empty()) {
    out.push_back(
        {CheckStatus::kFail, "no IOMMU registered (sys/class/iommu is empty)", kIommuFix});
  } else {
    out.push_back({CheckStatus::kPass, "IOMMU " + units.front() + " registered", ""});
  }
  for (Found* f : devices) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(f->pci_dir / "iommu_group", ec))) {
      out.push_back({CheckStatus::kPass, Label(f->device) + " is in an IOMMU group", ""});
    } else {
      out.push_back({CheckStatus::kFail, Label(f->device) + " has no iommu_group", kIommuFix});
    }
  }
  return out;
}

// name -> gid from an /etc/group file; malformed lines are skipped.
std::map<std::string, uint32_t> ReadGroups(const fs::path& path) {
  std::map<std::string, uint32_t> groups;
  auto text = ReadSmallFile(path, kGroupFileCap);
  if (!text) return groups;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    std::string_view line(text->data() + pos, end - pos);
    pos = end + 1;
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    size_t c3 = c2 == std::string_view::npos ? c2 : line.find(':', c2 + 1);
    if (c3 == std::string_view::npos || c1 == 0) continue;
    auto gid = ParseDecimal(line.substr(c2 + 1, c3 - c2 - 1), UINT32_MAX);
    if (gid) groups.emplace(std::string(line.substr(0, c1)), static_cast<uint32_t>(*gid));
  }
  return groups;
}

const char kUdevFix[] =
    "create /etc/udev/rules.d/99-amdxdna.rules with `SUBSYSTEM==\"accel\", KERNEL==\"accel*\", "
    "GROUP=\"render\", MODE=\"0660\"`, run `sudo udevadm control --reload && sudo udevadm "
    "trigger`, then `sudo usermod -aG render $USER` and log in again";

Finding DeviceAccessCheck(const DoctorOptions& options, const Found& f, uint32_t uid,
                          const std::vector<uint32_t>& gids) {
  const NpuDevice& d = f.device;
  if (d.accel.empty()) {
    return {CheckStatus::kFail,
            d.pci_address + ": no /dev/accel node (amdxdna creates it when it binds)",
            "fix the driver check first: " + std::string(kModprobeFix)};
  }
  std::string node = "/dev/accel/" + d.accel;
  fs::path path = fs::path(options.root) / node.substr(1);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return {CheckStatus::kFail, node + " does not exist",
            "check that udev runs (systemctl status systemd-udevd), then reload the driver: "
            "sudo modprobe -r amdxdna && sudo modprobe amdxdna"};
  }
  if (S_ISDIR(st.st_mode)) {
    return {CheckStatus::kFail, node + " is a directory, not a device node",
            "remove it and reload the driver: sudo modprobe -r amdxdna && sudo modprobe amdxdna"};
  }
  auto groups = ReadGroups(fs::path(options.root) / "etc/group");
  std::string group_name = std::to_string(st.st_gid);
  for (const auto& [name, gid] : groups) {
    if (gid == st.st_gid) group_name = name;
  }
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
  std::string owner =
      "owner uid " + std::to_string(st.st_uid) + ", group " + group_name + ", mode " + mode;
  // open(O_RDWR) needs read and write; the owner, group and other bits apply exclusively.
  unsigned bits = st.st_uid == uid ? (st.st_mode >> 6) & 7
                  : std::find(gids.begin(), gids.end(), st.st_gid) != gids.end()
                      ? (st.st_mode >> 3) & 7
                      : st.st_mode & 7;
  bool allowed = uid == 0 || (bits & 6) == 6;
  if (allowed) {
    return {CheckStatus::kPass,
            node + " is open to uid " + std::to_string(uid) + (uid == 0 ? " (root)" : "") + " (" +
                owner + ")",
            ""};
  }
  // ACLs (logind's uaccess) can grant what the mode denies; only this process can ask.
  if (!options.uid && !options.gids && ::access(path.c_str(), R_OK | W_OK) == 0) {
    return {CheckStatus::kPass, node + " is open to this user through an ACL (" + owner + ")", ""};
  }
  std::string detail =
      node + " (" + owner + ") is not readable and writable by uid " + std::to_string(uid);
  auto render = groups.find("render");
  if (render == groups.end()) {
    detail += "; there is no render group in /etc/group";
    return {CheckStatus::kFail, detail, "sudo groupadd -r render, then " + std::string(kUdevFix)};
  }
  bool in_render = std::find(gids.begin(), gids.end(), render->second) != gids.end();
  detail += in_render ? "; you are in the render group" : "; you are not in the render group";
  if (st.st_gid == render->second && (st.st_mode & 060) == 060 && !in_render) {
    return {CheckStatus::kFail, detail, "sudo usermod -aG render $USER, then log out and back in"};
  }
  return {CheckStatus::kFail, detail, kUdevFix};
}

// This process may pin without limit (CAP_IPC_LOCK, bit 14 of CapEff).
bool HasIpcLock() {
  auto status = ReadSmallFile("/proc/self/status", 64 * 1024);
  if (!status) return false;
  size_t pos = status->find("\nCapEff:");
  if (pos == std::string::npos) return false;
  std::string_view rest = std::string_view(*status).substr(pos + 8);
  std::optional<uint64_t> caps = sysfs::ParseHex(rest.substr(0, rest.find('\n')));
  return caps && ((*caps >> 14) & 1);
}

const char kMemlockFix[] =
    "add `* soft memlock unlimited` and `* hard memlock unlimited` to "
    "/etc/security/limits.d/99-amdxdna.conf and log in again (for a systemd service: "
    "LimitMEMLOCK=infinity)";

Finding MemlockCheck(const DoctorOptions& options) {
  uint64_t need = options.model_bytes > kMemlockUnlimited - kMemlockHeadroomBytes
                      ? kMemlockUnlimited
                      : options.model_bytes + kMemlockHeadroomBytes;
  std::string need_text =
      "needs " + MiB(need) + " (model " + MiB(options.model_bytes) + " + 512 MiB headroom)";
  uint64_t soft = kMemlockUnlimited, hard = kMemlockUnlimited;
  if (options.memlock_limit) {
    soft = hard = *options.memlock_limit;
  } else {
    struct rlimit rl {};
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
      return {CheckStatus::kWarn,
              std::string("getrlimit(RLIMIT_MEMLOCK) failed: ") + std::strerror(errno),
              kMemlockFix};
    }
    if (HasIpcLock()) {
      return {CheckStatus::kPass, "this process has CAP_IPC_LOCK: the memlock limit does not apply",
              ""};
    }
    soft = rl.rlim_cur == RLIM_INFINITY ? kMemlockUnlimited : rl.rlim_cur;
    hard = rl.rlim_max == RLIM_INFINITY ? kMemlockUnlimited : rl.rlim_max;
  }
  if (soft >= need) {
    return {CheckStatus::kPass, "RLIMIT_MEMLOCK " + MiB(soft) + "; the NPU " + need_text, ""};
  }
  if (hard >= need) {
    return {CheckStatus::kWarn,
            "RLIMIT_MEMLOCK " + MiB(soft) + " (hard " + MiB(hard) + "); the NPU " + need_text,
            "raise it before starting tessera (`ulimit -l unlimited`, allowed by the hard limit) "
            "or " +
                std::string(kMemlockFix)};
  }
  return {CheckStatus::kFail,
          "RLIMIT_MEMLOCK " + MiB(soft) + "; the NPU " + need_text +
              ": buffer allocation would fail (\"Lock limit exceeded\")",
          kMemlockFix};
}

struct Library {
  std::vector<int> version;  // major, minor, patch[, more]
  std::string dir;
  std::string text() const {
    std::string s;
    for (size_t i = 0; i < version.size(); ++i) s += (i ? "." : "") + std::to_string(version[i]);
    return s;
  }
  bool same_minor(const Library& o) const {
    return version[0] == o.version[0] && version[1] == o.version[1];
  }
};

// Files `<prefix><a.b.c>` in the XRT directories; the bare soname (`.so.2`) carries no minor.
std::vector<Library> FindLibraries(const fs::path& root, const std::string& prefix) {
  std::vector<Library> libs;
  for (const char* dir : {"opt/xilinx/xrt/lib", "usr/lib/x86_64-linux-gnu"}) {
    for (const std::string& name : ListDir(root / dir)) {
      if (name.rfind(prefix, 0) != 0) continue;
      std::string v = name.substr(prefix.size());
      if (!IsDottedNumbers(v, 3) && !IsDottedNumbers(v, 4)) continue;
      std::error_code ec;
      if (!fs::is_regular_file(root / dir / name, ec)) continue;
      Library lib{{}, dir};
      for (size_t p = 0; p < v.size();) {
        size_t e = std::min(v.find('.', p), v.size());
        lib.version.push_back(static_cast<int>(*ParseDecimal(v.substr(p, e - p), 1 << 30)));
        p = e + 1;
      }
      libs.push_back(std::move(lib));
    }
  }
  std::stable_sort(libs.begin(), libs.end(),
                   [](const Library& a, const Library& b) { return a.version > b.version; });
  return libs;
}

const char kXrtFix[] =
    "install matching xrt and xrt_plugin-amdxdna >= 2.17 (build both from amd/xdna-driver, "
    "which pins its XRT; they go to /opt/xilinx/xrt), and remove any plugin of another version";

Finding XrtCheck(const fs::path& root) {
  std::vector<Library> cores = FindLibraries(root, "libxrt_coreutil.so.");
  std::vector<Library> plugins = FindLibraries(root, "libxrt_driver_xdna.so.");
  if (cores.empty()) {
    return {
        CheckStatus::kFail,
        "no XRT (libxrt_coreutil.so.<x.y.z>) in /opt/xilinx/xrt/lib or "
        "/usr/lib/x86_64-linux-gnu" +
            std::string(plugins.empty() ? "" : "; found only the NPU plugin " + plugins[0].text()),
        kXrtFix};
  }
  for (const Library& core : cores) {
    if (core.version < std::vector<int>{2, 17}) continue;
    for (const Library& plugin : plugins) {
      if (!plugin.same_minor(core)) continue;
      Finding r{CheckStatus::kPass,
                "XRT " + core.text() + " (/" + core.dir + ") with NPU plugin " + plugin.text() +
                    " (/" + plugin.dir + ")",
                ""};
      for (const Library& other : cores) {
        if (other.same_minor(core)) continue;
        r.status = CheckStatus::kWarn;
        r.detail += "; also XRT " + other.text() + " in /" + other.dir;
        r.fix = "make sure the process loads /" + core.dir +
                " first (source /opt/xilinx/xrt/setup.sh) or remove XRT " + other.text();
      }
      return r;
    }
  }
  const Library& newest = cores[0];
  if (newest.version < std::vector<int>{2, 17}) {
    return {CheckStatus::kFail,
            "XRT " + newest.text() + " (/" + newest.dir +
                ") is older than 2.17, the first XRT with NPU support (amdxdna plugin, "
                "hw_context, runlist); Debian 12's XRT 2.13 cannot drive an NPU",
            kXrtFix};
  }
  if (plugins.empty()) {
    return {CheckStatus::kFail,
            "XRT " + newest.text() + " (/" + newest.dir +
                ") has no NPU plugin (libxrt_driver_xdna.so.<x.y.z>)",
            kXrtFix};
  }
  return {CheckStatus::kFail,
          "NPU plugin " + plugins[0].text() + " (/" + plugins[0].dir + ") does not match XRT " +
              newest.text() + " (/" + newest.dir + "): the plugin must match XRT's major.minor",
          kXrtFix};
}

void AddSkipped(DoctorReport& report, const std::string& name) {
  report.checks.push_back(
      {name, CheckStatus::kInfo, "not checked: no supported NPU found", "none: see npu_present"});
}

}  // namespace

std::string_view CheckStatusName(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kInfo:
      return "info";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kFail:
      return "fail";
  }
  return "fail";
}

const std::vector<std::string>& DoctorCheckNames() {
  static const std::vector<std::string> kNames = {"npu_present",   "driver",  "firmware", "iommu",
                                                  "device_access", "memlock", "xrt"};
  return kNames;
}

bool DoctorReport::ok() const {
  return std::none_of(checks.begin(), checks.end(),
                      [](const DoctorCheck& c) { return c.status == CheckStatus::kFail; });
}

const DoctorCheck* DoctorReport::Find(std::string_view check_name) const {
  for (const DoctorCheck& c : checks) {
    if (c.name == check_name) return &c;
  }
  return nullptr;
}

DoctorReport RunDoctor(const DoctorOptions& options) {
  DoctorReport report;
  fs::path root = options.root.empty() ? fs::path("/") : fs::path(options.root);
  std::vector<Found> found = Discover(root);
  std::vector<Found*> supported;
  for (Found& f : found) {
    if (f.device.generation) supported.push_back(&f);
  }
  report.checks.push_back(Combine("npu_present", {NpuPresentCheck(found)}));
  const auto& names = DoctorCheckNames();
  if (supported.empty()) {
    for (size_t i = 1; i < names.size(); ++i) AddSkipped(report, names[i]);
  } else {
    uint32_t uid = options.uid.value_or(static_cast<uint32_t>(::getuid()));
    std::vector<uint32_t> gids;
    if (options.gids) {
      gids = *options.gids;
    } else {
      gids.push_back(static_cast<uint32_t>(::getgid()));
      std::vector<gid_t> extra(256);
      int n = ::getgroups(static_cast<int>(extra.size()), extra.data());
      for (int i = 0; i < n; ++i) gids.push_back(static_cast<uint32_t>(extra[i]));
    }
    std::vector<Finding> driver, firmware, access;
    for (Found* f : supported) {
      driver.push_back(DriverCheck(root, *f, &report.tdr_timeout_ms));
      firmware.push_back(FirmwareCheck(root, *f));
      access.push_back(DeviceAccessCheck(options, *f, uid, gids));
    }
    report.checks.push_back(Combine("driver", driver));
    report.checks.push_back(Combine("firmware", firmware));
    report.checks.push_back(Combine("iommu", IommuChecks(root, supported)));
    report.checks.push_back(Combine("device_access", access));
    report.checks.push_back(Combine("memlock", {MemlockCheck(options)}));
    report.checks.push_back(Combine("xrt", {XrtCheck(root)}));
  }
  for (Found& f : found) {
    (f.device.generation ? report.devices : report.unsupported).push_back(std::move(f.device));
  }
  return report;
}

std::string DoctorReportJson(const DoctorReport& report) {
  using nlohmann::ordered_json;
  ordered_json devices = ordered_json::array();
  for (const NpuDevice& d : report.devices) {
    devices.push_back(ordered_json{
        {"pci_id", d.pci_id},
        {"revision", d.revision},
        {"generation", d.generation ? std::string(GenerationName(*d.generation)) : "unknown"},
        {"name", d.name},
        {"columns", d.columns},
        {"fw_version", d.fw_version},
        {"driver_version", d.driver_version}});
  }
  ordered_json checks = ordered_json::array();
  for (const DoctorCheck& c : report.checks) {
    checks.push_back(ordered_json{{"name", c.name},
                                  {"status", std::string(CheckStatusName(c.status))},
                                  {"detail", c.detail},
                                  {"fix", c.fix}});
  }
  ordered_json out = ordered_json{{"devices", std::move(devices)}, {"checks", std::move(checks)}};
  // Contents read from files may be any bytes: invalid UTF-8 is replaced, never thrown on.
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string DoctorReportText(const DoctorReport& report) {
  std::string out = "NPU devices:\n";
  if (report.devices.empty()) out += "  none supported\n";
  for (const NpuDevice& d : report.devices) {
    out += "  " + Label(d) + "  " + d.pci_id + " rev " + d.revision + "  " +
           std::string(GenerationName(*d.generation)) + "  " + d.name + "  " +
           std::to_string(d.columns) + " columns  firmware " +
           (d.fw_version.empty() ? "?" : d.fw_version) + "  driver " +
           (d.driver_version.empty() ? "?" : d.driver_version) + "\n";
  }
  for (const NpuDevice& d : report.unsupported) {
    out += "  " + Label(d) + "  " + (d.pci_id.empty() ? "?" : d.pci_id) + "  " + d.name +
           "  (not supported)\n";
  }
  out += "\n";
  char line[64];
  std::snprintf(line, sizeof(line), "%-14s %-6s %s\n", "CHECK", "STATUS", "DETAIL");
  out += line;
  int failed = 0, warned = 0;
  for (const DoctorCheck& c : report.checks) {
    failed += c.status == CheckStatus::kFail;
    warned += c.status == CheckStatus::kWarn;
    std::snprintf(line, sizeof(line), "%-14s %-6s ", c.name.c_str(),
                  std::string(CheckStatusName(c.status)).c_str());
    out += line + c.detail + "\n";
    if (!c.fix.empty()) out += std::string(22, ' ') + "fix: " + c.fix + "\n";
  }
  out += "\n" + std::to_string(failed) + " failed, " + std::to_string(warned) + " warnings";
  // Say what a run without an NPU means rather than leave "0 failed" to interpretation.
  if (report.devices.empty()) out += " (no NPU in use: the CPU backend runs every layer)";
  out += "\n";
  return out;
}

Expected<uint64_t> DirectoryBytes(const std::string& dir) {
  constexpr size_t kMaxEntries = 100000;
  constexpr int kMaxDepth = 16;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir + " is not a directory");
  uint64_t total = 0;
  size_t entries = 0;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (++entries > kMaxEntries) {
      return ResourceExhausted(dir + " holds more than " + std::to_string(kMaxEntries) +
                               " entries; is it a model directory?");
    }
    if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    std::error_code file_ec;
    if (it->is_regular_file(file_ec)) {  // follows symlinks (Hugging Face cache snapshots)
      uint64_t size = it->file_size(file_ec);
      if (!file_ec) total += size;
    }
  }
  if (ec) return IoError(dir + ": " + ec.message());
  return total;
}

}  // namespace tessera
