#include "backend/xdna/xclbin.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>

namespace tessera {
namespace {

// Offsets inside XRT's structs (xclbin.h; the static asserts there fix the sizes).
constexpr uint64_t kAxlfHeaderOffset = 304;  // struct axlf: magic 8, sig 4, reserved 28,
                                             // keyBlock 256, uniqueId 8
constexpr uint64_t kAxlfSectionTable = 456;  // sizeof(axlf) - sizeof(axlf_section_header)
constexpr uint64_t kSectionHeaderSize = 40;  // axlf_section_header
constexpr uint64_t kMemDataSize = 40;        // mem_data; mem_topology's array starts at 8
constexpr uint64_t kIpDataSize = 80;         // ip_data; ip_layout's array starts at 8
constexpr uint64_t kConnectionSize = 12;     // connection; connectivity's array starts at 4
constexpr uint64_t kAiePartitionSize = 184;  // aie_partition
constexpr uint64_t kMaxStartColumns = 1024;
constexpr size_t kMaxXmlArgs = 4096;
constexpr char kMagic[8] = {'x', 'c', 'l', 'b', 'i', 'n', '2', '\0'};

// Little-endian reads from a span the caller has bounds-checked with Has().
class Bytes {
 public:
  explicit Bytes(std::span<const uint8_t> b) : b_(b) {}
  uint64_t size() const { return b_.size(); }
  bool Has(uint64_t offset, uint64_t n) const {
    return offset <= b_.size() && n <= b_.size() - offset;
  }
  uint64_t Le(uint64_t offset, int n) const {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | b_[offset + i];
    return v;
  }
  uint8_t U8(uint64_t o) const { return b_[o]; }
  uint16_t U16(uint64_t o) const { return static_cast<uint16_t>(Le(o, 2)); }
  uint32_t U32(uint64_t o) const { return static_cast<uint32_t>(Le(o, 4)); }
  uint64_t U64(uint64_t o) const { return Le(o, 8); }
  // A NUL-terminated string in a fixed field of `n` bytes (the whole field if no NUL).
  std::string Chars(uint64_t o, uint64_t n) const {
    std::string s;
    for (uint64_t i = 0; i < n && b_[o + i] != 0; ++i) s.push_back(static_cast<char>(b_[o + i]));
    return s;
  }
  std::span<const uint8_t> Sub(uint64_t o, uint64_t n) const { return b_.subspan(o, n); }

 private:
  std::span<const uint8_t> b_;
};

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status Bad(const std::string& what) {
  return Corrupt("xclbin: " + what + "; rebuild the xclbin (aiecc/xclbinutil) or check the file");
}

std::string KindName(uint32_t kind) {
  switch (kind) {
    case 2:
      return "EMBEDDED_METADATA";
    case 6:
      return "MEM_TOPOLOGY";
    case 7:
      return "CONNECTIVITY";
    case 8:
      return "IP_LAYOUT";
    case 32:
      return "AIE_PARTITION";
    default:
      return "section kind " + std::to_string(kind);
  }
}

// A counted array at `array_offset` of a section: count read as int32 at 0.
Expected<uint64_t> CountedArray(const Bytes& s, uint64_t array_offset, uint64_t entry_size,
                                const char* section) {
  if (!s.Has(0, 4)) return Bad(std::string(section) + " is shorter than its 4-byte count");
  int32_t count = static_cast<int32_t>(s.U32(0));
  if (count < 0)
    return Bad(std::string(section) + " has a negative count " + std::to_string(count));
  uint64_t n = static_cast<uint64_t>(count);
  if (n > 0 && (!s.Has(array_offset, 0) || n > (s.size() - array_offset) / entry_size)) {
    return Bad(std::string(section) + " declares " + std::to_string(n) + " entries of " +
               std::to_string(entry_size) + " bytes but the section has " +
               std::to_string(s.size()) + " bytes");
  }
  return n;
}

// ---- EMBEDDED_METADATA: a minimal, bounded scan of the XML for <kernel> and <arg> ----

struct XmlElement {
  std::map<std::string, std::string> attrs;
  size_t end = 0;  // just past the tag's '>'
  bool self_closing = false;
};

bool IsXmlSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':' || c == '.' || c == '-';
}

std::string DecodeEntities(std::string_view v) {
  static const std::pair<std::string_view, char> kEntities[] = {
      {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
  std::string out;
  for (size_t i = 0; i < v.size();) {
    bool replaced = false;
    if (v[i] == '&') {
      for (const auto& [entity, c] : kEntities) {
        if (v.substr(i, entity.size()) == entity) {
          out.push_back(c);
          i += entity.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out.push_back(v[i++]);
  }
  return out;
}

// Parses the attributes of the tag whose name ends at `pos` (just after "<name").
Expected<XmlElement> ParseTag(std::string_view xml, size_t pos) {
  XmlElement e;
  while (true) {
    while (pos < xml.size() && IsXmlSpace(xml[pos])) ++pos;
    if (pos >= xml.size()) return Bad("EMBEDDED_METADATA XML ends inside a tag");
    if (xml[pos] == '>') {
      e.end = pos + 1;
      return e;
    }
    if (xml[pos] == '/') {
      if (pos + 1 >= xml.size() || xml[pos + 1] != '>') {
        return Bad("EMBEDDED_METADATA XML has a stray '/' at byte " + std::to_string(pos));
      }
      e.self_closing = true;
      e.end = pos + 2;
      return e;
    }
    size_t name_start = pos;
    while (pos < xml.size() && IsNameChar(xml[pos])) ++pos;
    if (pos == name_start) {
      return Bad("EMBEDDED_METADATA XML has an unexpected character at byte " +
                 std::to_string(pos));
    }
    std::string name(xml.substr(name_start, pos - name_start));
    while (pos < xml.size() && IsXmlSpace(xml[pos])) ++pos;
    if (pos >= xml.size() || xml[pos] != '=') {
      return Bad("EMBEDDED_METADATA XML attribute '" + name + "' has no value (byte " +
                 std::to_string(pos) + ")");
    }
    ++pos;
    while (pos < xml.size() && IsXmlSpace(xml[pos])) ++pos;
    if (pos >= xml.size() || (xml[pos] != '"' && xml[pos] != '\'')) {
      return Bad("EMBEDDED_METADATA XML attribute '" + name + "' is not quoted (byte " +
                 std::to_string(pos) + ")");
    }
    char quote = xml[pos++];
    size_t close = xml.find(quote, pos);
    if (close == std::string_view::npos) {
      return Bad("EMBEDDED_METADATA XML attribute '" + name + "' is not closed");
    }
    e.attrs[name] = DecodeEntities(xml.substr(pos, close - pos));
    pos = close + 1;
  }
}

// Finds the next "<name" tag (followed by space, '>' or '/') at or after `from`.
size_t FindTag(std::string_view xml, std::string_view name, size_t from, size_t limit) {
  std::string open = "<" + std::string(name);
  while (from < limit) {
    size_t p = xml.find(open, from);
    if (p == std::string_view::npos || p + open.size() >= limit) return std::string_view::npos;
    char next = xml[p + open.size()];
    if (IsXmlSpace(next) || next == '>' || next == '/') return p;
    from = p + 1;
  }
  return std::string_view::npos;
}

Expected<uint64_t> XmlNumber(const XmlElement& e, const std::string& attr, const std::string& arg,
                             bool required) {
  auto it = e.attrs.find(attr);
  if (it == e.attrs.end() || it->second.empty()) {
    if (!required) return uint64_t{0};
    return Bad("EMBEDDED_METADATA argument '" + arg + "' has no " + attr);
  }
  const std::string& v = it->second;
  bool hex = v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
  uint64_t value = 0;
  size_t start = hex ? 2 : 0;
  if (v.size() - start > (hex ? 16u : 19u)) {
    return Bad("EMBEDDED_METADATA argument '" + arg + "' " + attr + " '" + v + "' is too long");
  }
  for (size_t i = start; i < v.size(); ++i) {
    char c = v[i];
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (hex && c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (hex && c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) {
      return Bad("EMBEDDED_METADATA argument '" + arg + "' " + attr + " '" + v +
                 "' is not a number");
    }
    value = value * (hex ? 16 : 10) + static_cast<uint64_t>(digit);
  }
  return value;
}

struct XmlKernel {
  std::string name, type;
  std::vector<XclbinKernelArg> args;
};

Expected<std::vector<XmlKernel>> ScanMetadata(std::string_view xml) {
  std::vector<XmlKernel> kernels;
  size_t pos = 0;
  size_t total_args = 0;
  while (true) {
    size_t k = FindTag(xml, "kernel", pos, xml.size());
    if (k == std::string_view::npos) break;
    TS_ASSIGN_OR_RETURN(XmlElement tag, ParseTag(xml, k + 7));
    XmlKernel kernel;
    kernel.name = tag.attrs.count("name") ? tag.attrs["name"] : "";
    kernel.type = tag.attrs.count("type") ? tag.attrs["type"] : "";
    if (kernel.name.empty()) {
      return Bad("EMBEDDED_METADATA has a <kernel> without a name (byte " + std::to_string(k) +
                 ")");
    }
    size_t body_end = tag.end;
    if (!tag.self_closing) {
      size_t close = xml.find("</kernel>", tag.end);
      if (close == std::string_view::npos) {
        return Bad("EMBEDDED_METADATA kernel '" + kernel.name + "' has no </kernel>");
      }
      body_end = close;
    }
    std::set<int> ids;
    size_t a = tag.end;
    while (a < body_end) {
      size_t p = FindTag(xml, "arg", a, body_end);
      if (p == std::string_view::npos) break;
      TS_ASSIGN_OR_RETURN(XmlElement at, ParseTag(xml, p + 4));
      if (at.end > body_end) return Bad("EMBEDDED_METADATA <arg> runs past its </kernel>");
      if (++total_args > kMaxXmlArgs) return Bad("EMBEDDED_METADATA has too many <arg> elements");
      XclbinKernelArg arg;
      arg.name = at.attrs.count("name") ? at.attrs["name"] : "";
      if (arg.name.empty()) {
        return Bad("EMBEDDED_METADATA kernel '" + kernel.name + "' has an <arg> without a name");
      }
      TS_ASSIGN_OR_RETURN(uint64_t aq, XmlNumber(at, "addressQualifier", arg.name, false));
      TS_ASSIGN_OR_RETURN(uint64_t id, XmlNumber(at, "id", arg.name, true));
      TS_ASSIGN_OR_RETURN(arg.size, XmlNumber(at, "size", arg.name, false));
      TS_ASSIGN_OR_RETURN(arg.offset, XmlNumber(at, "offset", arg.name, false));
      TS_ASSIGN_OR_RETURN(arg.host_offset, XmlNumber(at, "hostOffset", arg.name, false));
      TS_ASSIGN_OR_RETURN(arg.host_size, XmlNumber(at, "hostSize", arg.name, false));
      if (aq > 4 || id >= kMaxXmlArgs) {
        return Bad("EMBEDDED_METADATA argument '" + arg.name + "' has addressQualifier " +
                   std::to_string(aq) + " / id " + std::to_string(id) + " out of range");
      }
      arg.address_qualifier = static_cast<int>(aq);
      arg.id = static_cast<int>(id);
      if (!ids.insert(arg.id).second) {
        return Bad("EMBEDDED_METADATA kernel '" + kernel.name + "' has two arguments with id " +
                   std::to_string(arg.id));
      }
      arg.port = at.attrs.count("port") ? at.attrs["port"] : "";
      arg.type = at.attrs.count("type") ? at.attrs["type"] : "";
      kernel.args.push_back(std::move(arg));
      a = at.end;
    }
    std::sort(kernel.args.begin(), kernel.args.end(),
              [](const XclbinKernelArg& x, const XclbinKernelArg& y) { return x.id < y.id; });
    kernels.push_back(std::move(kernel));
    pos = tag.self_closing ? tag.end : body_end + 9;
  }
  return kernels;
}

// ---- the sections ----

Status ParseMemTopology(const Bytes& s, XclbinInfo& info) {
  TS_ASSIGN_OR_RETURN(uint64_t n, CountedArray(s, 8, kMemDataSize, "MEM_TOPOLOGY"));
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t o = 8 + i * kMemDataSize;
    XclbinMemBank bank;
    bank.type = s.U8(o);
    bank.used = s.U8(o + 1) != 0;
    bank.size_kb = s.U64(o + 8);
    bank.base_address = s.U64(o + 16);
    bank.tag = s.Chars(o + 24, 16);
    info.mem_banks.push_back(std::move(bank));
  }
  return Status::Ok();
}

Status ParseIpLayout(const Bytes& s, XclbinInfo& info) {
  TS_ASSIGN_OR_RETURN(uint64_t n, CountedArray(s, 8, kIpDataSize, "IP_LAYOUT"));
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t o = 8 + i * kIpDataSize;
    XclbinIp ip;
    ip.type = s.U32(o);
    ip.properties = s.U32(o + 4);
    ip.base_address = s.U64(o + 8);
    ip.name = s.Chars(o + 16, 64);
    info.ips.push_back(std::move(ip));
  }
  return Status::Ok();
}

Status ParseConnectivity(const Bytes& s, XclbinInfo& info) {
  TS_ASSIGN_OR_RETURN(uint64_t n, CountedArray(s, 4, kConnectionSize, "CONNECTIVITY"));
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t o = 4 + i * kConnectionSize;
    XclbinConnection c;
    c.arg_index = static_cast<int32_t>(s.U32(o));
    c.ip_index = static_cast<int32_t>(s.U32(o + 4));
    c.mem_index = static_cast<int32_t>(s.U32(o + 8));
    if (c.arg_index < 0 || c.ip_index < 0 || static_cast<uint64_t>(c.ip_index) >= info.ips.size() ||
        c.mem_index < 0 || static_cast<uint64_t>(c.mem_index) >= info.mem_banks.size()) {
      return Bad("CONNECTIVITY entry " + std::to_string(i) + " (arg " +
                 std::to_string(c.arg_index) + ", ip " + std::to_string(c.ip_index) + ", bank " +
                 std::to_string(c.mem_index) + ") points outside IP_LAYOUT (" +
                 std::to_string(info.ips.size()) + " entries) or MEM_TOPOLOGY (" +
                 std::to_string(info.mem_banks.size()) + " banks)");
    }
    info.connections.push_back(c);
  }
  return Status::Ok();
}

Status ParseAiePartition(const Bytes& s, XclbinInfo& info) {
  if (!s.Has(0, kAiePartitionSize)) {
    return Bad("AIE_PARTITION has " + std::to_string(s.size()) + " bytes, fewer than the " +
               std::to_string(kAiePartitionSize) + "-byte aie_partition header");
  }
  XclbinAiePartition p;
  uint32_t name_offset = s.U32(4);
  p.operations_per_cycle = s.U32(8);
  p.column_width = s.U16(32);
  uint64_t columns = s.U32(40);
  uint64_t columns_offset = s.U32(44);
  p.pdi_count = s.U32(120);
  if (columns > kMaxStartColumns || !s.Has(columns_offset, columns * 2)) {
    return Bad("AIE_PARTITION start_columns (" + std::to_string(columns) + " at offset " +
               std::to_string(columns_offset) + ") lie outside the " + std::to_string(s.size()) +
               "-byte section");
  }
  for (uint64_t i = 0; i < columns; ++i) p.start_columns.push_back(s.U16(columns_offset + 2 * i));
  if (name_offset != 0) {
    if (!s.Has(name_offset, 1)) {
      return Bad("AIE_PARTITION name offset " + std::to_string(name_offset) +
                 " lies outside the section");
    }
    p.name = s.Chars(name_offset, std::min<uint64_t>(s.size() - name_offset, 256));
  }
  if (p.column_width == 0) return Bad("AIE_PARTITION has column width 0");
  info.aie_partition = std::move(p);
  return Status::Ok();
}

}  // namespace

std::string XclbinInfo::UuidString() const {
  std::string out;
  char buf[3];
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    std::snprintf(buf, sizeof(buf), "%02x", uuid[i]);
    out += buf;
  }
  return out;
}

const XclbinKernel* XclbinInfo::FindKernel(std::string_view name) const {
  for (const auto& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<std::string> XclbinInfo::KernelNames() const {
  std::vector<std::string> names;
  for (const auto& k : kernels) names.push_back(k.name);
  return names;
}

Expected<XclbinInfo> ParseXclbin(std::span<const uint8_t> input) {
  Bytes file(input);
  if (!file.Has(0, kAxlfSectionTable)) {
    return Bad("file has " + std::to_string(input.size()) + " bytes, fewer than the " +
               std::to_string(kAxlfSectionTable) + "-byte axlf header");
  }
  if (!std::equal(std::begin(kMagic), std::end(kMagic), input.begin())) {
    return Bad("missing the \"xclbin2\" magic (not an axlf xclbin)");
  }
  XclbinInfo info;
  const uint64_t h = kAxlfHeaderOffset;
  info.length = file.U64(h);
  info.version_patch = file.U16(h + 24);
  info.version_major = file.U8(h + 26);
  info.version_minor = file.U8(h + 27);
  std::copy_n(input.begin() + h + 112, 16, info.uuid.begin());
  uint32_t num_sections = file.U32(h + 144);
  if (info.length < kAxlfSectionTable || info.length > input.size()) {
    return Bad("header length " + std::to_string(info.length) + " does not fit the " +
               std::to_string(input.size()) + "-byte file (truncated?)");
  }
  Bytes axlf(input.first(info.length));
  if (num_sections > kXclbinMaxSections) {
    return Bad("header declares " + std::to_string(num_sections) + " sections (at most " +
               std::to_string(kXclbinMaxSections) + ")");
  }
  const uint64_t table_end = kAxlfSectionTable + uint64_t{num_sections} * kSectionHeaderSize;
  if (!axlf.Has(0, table_end)) {
    return Bad("the table of " + std::to_string(num_sections) + " section headers ends at byte " +
               std::to_string(table_end) + ", past the " + std::to_string(info.length) +
               "-byte file");
  }
  std::map<uint32_t, const XclbinSection*> wanted;
  for (uint32_t i = 0; i < num_sections; ++i) {
    uint64_t o = kAxlfSectionTable + uint64_t{i} * kSectionHeaderSize;
    XclbinSection sec;
    sec.kind = axlf.U32(o);
    sec.name = axlf.Chars(o + 4, 16);
    sec.offset = axlf.U64(o + 24);
    sec.size = axlf.U64(o + 32);
    if (sec.offset < table_end || !axlf.Has(sec.offset, sec.size)) {
      return Bad("section " + std::to_string(i) + " (" + KindName(sec.kind) + ") at offset " +
                 Hex(sec.offset) + " size " + Hex(sec.size) +
                 " lies outside the file's data area [" + Hex(table_end) + ", " + Hex(info.length) +
                 ")");
    }
    info.sections.push_back(std::move(sec));
  }
  for (const auto& sec : info.sections) {
    switch (static_cast<AxlfSectionKind>(sec.kind)) {
      case AxlfSectionKind::kEmbeddedMetadata:
      case AxlfSectionKind::kMemTopology:
      case AxlfSectionKind::kConnectivity:
      case AxlfSectionKind::kIpLayout:
      case AxlfSectionKind::kAiePartition:
        if (!wanted.emplace(sec.kind, &sec).second) {
          return Bad("two " + KindName(sec.kind) + " sections (expected one)");
        }
        break;
      default:
        break;  // other sections (PDI, BUILD_METADATA, ...) are not interpreted here
    }
  }
  auto section = [&](AxlfSectionKind kind) -> std::optional<Bytes> {
    auto it = wanted.find(static_cast<uint32_t>(kind));
    if (it == wanted.end()) return std::nullopt;
    return Bytes(axlf.Sub(it->second->offset, it->second->size));
  };
  // Order matters: CONNECTIVITY refers to IP_LAYOUT and MEM_TOPOLOGY entries.
  if (auto s = section(AxlfSectionKind::kMemTopology))
    TS_RETURN_IF_ERROR(ParseMemTopology(*s, info));
  if (auto s = section(AxlfSectionKind::kIpLayout)) TS_RETURN_IF_ERROR(ParseIpLayout(*s, info));
  if (auto s = section(AxlfSectionKind::kConnectivity)) {
    TS_RETURN_IF_ERROR(ParseConnectivity(*s, info));
  }
  if (auto s = section(AxlfSectionKind::kAiePartition)) {
    TS_RETURN_IF_ERROR(ParseAiePartition(*s, info));
  }
  std::vector<XmlKernel> xml_kernels;
  if (auto s = section(AxlfSectionKind::kEmbeddedMetadata)) {
    if (s->size() > kXclbinMaxMetadataBytes) {
      return Bad("EMBEDDED_METADATA has " + std::to_string(s->size()) + " bytes (at most " +
                 std::to_string(kXclbinMaxMetadataBytes) + ")");
    }
    auto bytes = s->Sub(0, s->size());
    std::string_view xml(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (size_t nul = xml.find('\0'); nul != std::string_view::npos) xml = xml.substr(0, nul);
    TS_ASSIGN_OR_RETURN(xml_kernels, ScanMetadata(xml));
  }

  // Kernels: the IP_LAYOUT compute units, named "kernel:instance".
  for (size_t i = 0; i < info.ips.size(); ++i) {
    const XclbinIp& ip = info.ips[i];
    if (ip.type != kIpTypeKernel && ip.type != kIpTypePsKernel) continue;
    size_t colon = ip.name.find(':');
    std::string kname = ip.name.substr(0, colon);
    std::string instance = colon == std::string::npos ? "" : ip.name.substr(colon + 1);
    if (kname.empty()) return Bad("IP_LAYOUT entry " + std::to_string(i) + " has no kernel name");
    auto it = std::find_if(info.kernels.begin(), info.kernels.end(),
                           [&](const XclbinKernel& k) { return k.name == kname; });
    if (it == info.kernels.end()) {
      XclbinKernel k;
      k.name = kname;
      info.kernels.push_back(std::move(k));
      it = info.kernels.end() - 1;
    }
    it->instances.push_back(instance);
    it->ip_indices.push_back(static_cast<int>(i));
  }
  for (auto& k : info.kernels) {
    for (auto& xk : xml_kernels) {
      if (xk.name != k.name) continue;
      k.has_metadata = true;
      k.type = xk.type;
      k.args = xk.args;
      break;
    }
    // The banks each argument reaches, from the first compute unit's connections.
    for (auto& arg : k.args) {
      for (const auto& c : info.connections) {
        if (c.ip_index == k.ip_indices.front() && c.arg_index == arg.id) {
          arg.mem_index = c.mem_index;
          arg.mem_tag = info.mem_banks[static_cast<size_t>(c.mem_index)].tag;
          break;
        }
      }
    }
  }
  return info;
}

std::vector<XclbinKernelArg> MlirAieKernelArgs() {
  std::vector<XclbinKernelArg> args;
  auto add = [&](std::string name, int aq, uint64_t size, uint64_t offset, std::string type,
                 std::string tag) {
    XclbinKernelArg a;
    a.name = std::move(name);
    a.address_qualifier = aq;
    a.id = static_cast<int>(args.size());
    a.size = size;
    a.offset = offset;
    a.host_size = size;
    a.type = std::move(type);
    a.mem_tag = std::move(tag);
    args.push_back(std::move(a));
  };
  add("opcode", 0, 8, 0x00, "uint64_t", "");
  add("instr", 1, 8, 0x08, "char *", "SRAM");
  add("ninstr", 0, 4, 0x10, "uint32_t", "");
  for (int i = 0; i < 5; ++i) {
    add("bo" + std::to_string(i), 1, 8, 0x14 + 8 * static_cast<uint64_t>(i), "void*", "HOST");
  }
  return args;
}

std::vector<std::string> ArgNames(const std::vector<XclbinKernelArg>& args) {
  std::vector<std::string> names;
  for (const auto& a : args) names.push_back(a.name);
  return names;
}

// ---- writer ----

namespace {

class Writer {
 public:
  std::vector<uint8_t> bytes;
  void Put(uint64_t offset, uint64_t value, int n) {
    if (bytes.size() < offset + n) bytes.resize(offset + n, 0);
    for (int i = 0; i < n; ++i) bytes[offset + i] = static_cast<uint8_t>(value >> (8 * i));
  }
  void PutChars(uint64_t offset, std::string_view s, size_t field) {
    if (bytes.size() < offset + field) bytes.resize(offset + field, 0);
    for (size_t i = 0; i < field; ++i) bytes[offset + i] = i < s.size() ? s[i] : 0;
  }
  void Align8() { bytes.resize((bytes.size() + 7) / 8 * 8, 0); }
};

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string MetadataXml(const XclbinSpec& spec) {
  std::string x;
  x += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<project name=\"" + XmlEscape(spec.kernel_name) + "\">\n";
  x += "  <platform vendor=\"xilinx\" boardid=\"\" name=\"\" featureRomTime=\"0\">\n";
  x += "    <version major=\"1\" minor=\"0\"/>\n";
  x += "    <description/>\n";
  x += "    <device name=\"fpga0\" fpgaDevice=\"\" addrWidth=\"0\">\n";
  x += "      <core name=\"OCL_REGION_0\" target=\"hw\" type=\"clc_region\" clockFreq=\"0MHz\" "
       "numComputeUnits=\"1\">\n";
  x += "        <kernel name=\"" + XmlEscape(spec.kernel_name) +
       "\" language=\"c\" vlnv=\"\" preferredWorkGroupSizeMultiple=\"0\" workGroupSize=\"1\" "
       "debug=\"false\" interrupt=\"false\" hwControlProtocol=\"ap_ctrl_hs\" type=\"" +
       XmlEscape(spec.kernel_type) + "\">\n";
  for (const auto& a : spec.args) {
    x += "          <arg name=\"" + XmlEscape(a.name) + "\" addressQualifier=\"" +
         std::to_string(a.address_qualifier) + "\" id=\"" + std::to_string(a.id) + "\" port=\"" +
         XmlEscape(a.port) + "\" size=\"" + Hex(a.size) + "\" offset=\"" + Hex(a.offset) +
         "\" hostOffset=\"" + Hex(a.host_offset) + "\" hostSize=\"" + Hex(a.host_size) +
         "\" type=\"" + XmlEscape(a.type) + "\"/>\n";
  }
  x += "          <instance name=\"" + XmlEscape(spec.instance_name) + "\"/>\n";
  x += "        </kernel>\n      </core>\n    </device>\n  </platform>\n</project>\n";
  return x;
}

}  // namespace

std::vector<uint8_t> BuildXclbin(const XclbinSpec& spec) {
  struct Section {
    uint32_t kind;
    std::string name;
    std::vector<uint8_t> data;
  };
  std::vector<Section> sections;

  {  // MEM_TOPOLOGY: bank 0 HOST, bank 1 SRAM (mlir-aie's aiecc)
    Writer w;
    w.Put(0, 2, 4);
    const std::pair<const char*, uint64_t> banks[] = {{"HOST", spec.host_bank_kb},
                                                      {"SRAM", spec.sram_bank_kb}};
    for (int i = 0; i < 2; ++i) {
      uint64_t o = 8 + static_cast<uint64_t>(i) * kMemDataSize;
      w.Put(o, kMemTypeDram, 1);
      w.Put(o + 1, 1, 1);
      w.Put(o + 8, banks[i].second, 8);
      w.Put(o + 16, 0x4000000, 8);
      w.PutChars(o + 24, banks[i].first, 16);
    }
    sections.push_back(
        {static_cast<uint32_t>(AxlfSectionKind::kMemTopology), "mem_topology", std::move(w.bytes)});
  }
  {  // IP_LAYOUT: one compute unit "kernel:instance"
    Writer w;
    w.Put(0, 1, 4);
    w.Put(8, spec.ip_type, 4);
    bool ps = spec.ip_type == kIpTypePsKernel;
    // PS kernel properties: m_subtype ST_DPU (1) in bits 0-1, m_functional FC_DPU (0) in bits
    // 4-5, m_kernel_id in bits 16-27. aiecc's base address "not_used" is stored as all ones.
    w.Put(12, ps ? (1u | ((spec.kernel_id & 0xfffu) << 16)) : 0u, 4);
    w.Put(16, ps ? ~uint64_t{0} : 0, 8);
    w.PutChars(24, spec.kernel_name + ":" + spec.instance_name, 64);
    sections.push_back(
        {static_cast<uint32_t>(AxlfSectionKind::kIpLayout), "ip_layout", std::move(w.bytes)});
  }
  {  // CONNECTIVITY: every global argument to its bank
    Writer w;
    uint32_t count = 0;
    for (const auto& a : spec.args) {
      if (a.address_qualifier != 1 || a.mem_tag.empty()) continue;
      uint64_t o = 4 + uint64_t{count} * kConnectionSize;
      w.Put(o, static_cast<uint32_t>(a.id), 4);
      w.Put(o + 4, 0, 4);
      w.Put(o + 8, a.mem_tag == "SRAM" ? 1 : 0, 4);
      ++count;
    }
    w.Put(0, count, 4);
    w.Align8();
    sections.push_back({static_cast<uint32_t>(AxlfSectionKind::kConnectivity), "connectivity",
                        std::move(w.bytes)});
  }
  if (spec.with_metadata) {
    std::string xml = MetadataXml(spec);
    sections.push_back({static_cast<uint32_t>(AxlfSectionKind::kEmbeddedMetadata), "metadata",
                        std::vector<uint8_t>(xml.begin(), xml.end())});
  }
  if (spec.with_aie_partition) {
    Writer w;
    w.Put(kAiePartitionSize - 1, 0, 1);  // the zeroed 184-byte header
    uint64_t columns_at = kAiePartitionSize;
    uint64_t name_at = columns_at + 2 * spec.start_columns.size();
    w.Put(4, name_at, 4);  // mpo_name
    w.Put(8, spec.operations_per_cycle, 4);
    w.Put(32, spec.column_width, 2);
    w.Put(40, spec.start_columns.size(), 4);
    w.Put(44, columns_at, 4);
    w.Put(120, 0, 4);  // no PDIs: nothing here runs on an AIE array
    for (size_t i = 0; i < spec.start_columns.size(); ++i) {
      w.Put(columns_at + 2 * i, spec.start_columns[i], 2);
    }
    w.PutChars(name_at, "QoS", 4);
    w.Align8();
    sections.push_back({static_cast<uint32_t>(AxlfSectionKind::kAiePartition), "aie_partition",
                        std::move(w.bytes)});
  }

  Writer out;
  out.PutChars(0, std::string_view(kMagic, 8), 8);
  out.Put(8, 0xffffffffu, 4);  // m_signature_length -1: unsigned
  for (uint64_t i = 12; i < kAxlfHeaderOffset - 8; ++i) out.Put(i, 0xff, 1);  // reserved, keyBlock
  out.Put(kAxlfHeaderOffset - 8, 0, 8);                                       // m_uniqueId
  const uint64_t h = kAxlfHeaderOffset;
  out.Put(h + 26, 2, 1);  // version 2.13.0, the XRT this was checked against
  out.Put(h + 27, 13, 1);
  for (size_t i = 0; i < spec.uuid.size(); ++i) out.Put(h + 112 + i, spec.uuid[i], 1);
  out.Put(h + 144, sections.size(), 4);
  uint64_t table_end = kAxlfSectionTable + sections.size() * kSectionHeaderSize;
  out.Put(table_end - 1, 0, 1);
  out.Align8();
  for (size_t i = 0; i < sections.size(); ++i) {
    uint64_t offset = out.bytes.size();
    uint64_t o = kAxlfSectionTable + i * kSectionHeaderSize;
    out.Put(o, sections[i].kind, 4);
    out.PutChars(o + 4, sections[i].name, 16);
    out.Put(o + 24, offset, 8);
    out.Put(o + 32, sections[i].data.size(), 8);
    out.bytes.insert(out.bytes.end(), sections[i].data.begin(), sections[i].data.end());
    out.Align8();
  }
  out.Put(h, out.bytes.size(), 8);  // m_length
  return std::move(out.bytes);
}

}  // namespace tessera
