#include "base/status.h"

namespace tessera {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kCorrupt:
      return "corrupt";
    case ErrorCode::kIo:
      return "io_error";
    case ErrorCode::kOutOfRange:
      return "out_of_range";
    case ErrorCode::kResourceExhausted:
      return "resource_exhausted";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kDeviceLost:
      return "device_lost";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
  }
  return "unknown";
}

}  // namespace tessera
