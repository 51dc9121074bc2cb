// Status and Expected<T>: tessera's error values. No exception crosses a library boundary;
// every fallible function returns one of these, and every message says what was wrong and,
// where it helps, what to do.
//
//   Expected<int> ParsePort(std::string_view s);
//   auto port = ParsePort("80");
//   if (!port) return port.status();          // propagate
//   TS_ASSIGN_OR_RETURN(int p, ParsePort(s));  // or the macro form
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input is wrong (maps to HTTP 400)
  kNotFound,           // a file, tensor, model or token does not exist (404)
  kUnsupported,        // understood but not supported (architecture, dtype, feature)
  kCorrupt,            // data is malformed or inconsistent (bad safetensors, bad JSON)
  kIo,                 // the operating system refused (open, read, mmap)
  kOutOfRange,         // an index or size past a limit
  kResourceExhausted,  // a bound was hit (memory, steps, queue)
  kCancelled,
  kDeadlineExceeded,
  kInternal,          // a bug in tessera
  kDeviceLost,        // an accelerator stopped answering; nothing runs on it in this process
  kPermissionDenied,  // a safety policy refuses it (e.g. --no-auth on a non-loopback address)
};

const char* ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<message>" for display; the code is for programs, the message for people.
  std::string ToString() const { return ok() ? std::string("ok") : message_; }
  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {ErrorCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {ErrorCode::kNotFound, std::move(m)};
}
inline Status Unsupported(std::string m) {
  return {ErrorCode::kUnsupported, std::move(m)};
}
inline Status Corrupt(std::string m) {
  return {ErrorCode::kCorrupt, std::move(m)};
}
inline Status IoError(std::string m) {
  return {ErrorCode::kIo, std::move(m)};
}
inline Status OutOfRange(std::string m) {
  return {ErrorCode::kOutOfRange, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {ErrorCode::kResourceExhausted, std::move(m)};
}
inline Status Cancelled(std::string m) {
  return {ErrorCode::kCancelled, std::move(m)};
}
inline Status DeadlineExceeded(std::string m) {
  return {ErrorCode::kDeadlineExceeded, std::move(m)};
}
inline Status Internal(std::string m) {
  return {ErrorCode::kInternal, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {ErrorCode::kPermissionDenied, std::move(m)};
}
inline Status DeviceLost(std::string m) {
  return {ErrorCode::kDeviceLost, std::move(m)};
}

// A value or the Status explaining why there is none. Callers check has_value() before
// touching the value; reading the value of an error is a programming bug (std::get throws).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : data_(std::in_place_index<0>, std::move(value)) {}
  Expected(Status status) : data_(std::in_place_index<1>, std::move(status)) {
    if (std::get<1>(data_).ok()) {
      std::get<1>(data_) = Internal("Expected constructed from an ok Status");
    }
  }

  bool has_value() const { return data_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; Status::Ok() when a value is present.
  Status status() const { return has_value() ? Status::Ok() : std::get<1>(data_); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace tessera

#define TS_CONCAT_INNER(a, b) a##b
#define TS_CONCAT(a, b) TS_CONCAT_INNER(a, b)

#define TS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::tessera::Status ts_status_ = (expr);   \
    if (!ts_status_.ok()) return ts_status_; \
  } while (0)

#define TS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.has_value()) return tmp.status();     \
  lhs = std::move(tmp).value()

#define TS_ASSIGN_OR_RETURN(lhs, expr) \
  TS_ASSIGN_OR_RETURN_IMPL(TS_CONCAT(ts_expected_, __LINE__), lhs, expr)
