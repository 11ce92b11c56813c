// Errors inside the kernel: a KernelError carries the message of the OrtStatus the runtime gets.
#pragma once

#include <stdexcept>
#include <string>

#include "ort_api.h"

namespace omr {

class KernelError : public std::runtime_error {
 public:
  KernelError(OrtErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  OrtErrorCode code() const { return code_; }

 private:
  OrtErrorCode code_;
};

// Throws a KernelError with the runtime's message if `status` is an error (and releases it).
inline void Check(OrtStatus* status) {
  if (status == nullptr) return;
  std::string message = ORT_CALL(GetErrorMessage, status);
  ORT_CALL(ReleaseStatus, status);
  throw KernelError(ORT_FAIL, message);
}

// Runs `body`, turning any exception into an OrtStatus (nullptr on success).
template <class Body>
OrtStatus* Guard(Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const KernelError& e) {
    return ORT_CALL(CreateStatus, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return ORT_CALL(CreateStatus, ORT_FAIL, "onnx_masked_rnn kernel: out of memory");
  } catch (const std::exception& e) {
    return ORT_CALL(CreateStatus, ORT_FAIL, e.what());
  }
}

}  // namespace omr
