#include "ort_api.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

OrtApiTable g_table;
std::atomic<uint64_t> g_calls[static_cast<size_t>(OrtApiEntry::kCount)];

constexpr const char* kEntryNames[] = {
#define OMR_ORT_API_NAME(name, index, ret, ...) #name,
    OMR_ORT_API_ENTRIES(OMR_ORT_API_NAME)
#undef OMR_ORT_API_NAME
};

}  // namespace

void LoadOrtApiTable(const OrtApi* api, OrtApiTable* table) {
  const auto* entries = reinterpret_cast<void* const*>(api);
#define OMR_ORT_API_LOAD(name, index, ret, ...) \
  table->name = reinterpret_cast<ret (*)(__VA_ARGS__) noexcept>(entries[index]);
  OMR_ORT_API_ENTRIES(OMR_ORT_API_LOAD)
#undef OMR_ORT_API_LOAD
}

const OrtApiTable& OrtApiTableLoaded() { return g_table; }

OrtApiTable* MutableOrtApiTable() { return &g_table; }

void CountOrtApiCall(OrtApiEntry entry) {
  g_calls[static_cast<size_t>(entry)].fetch_add(1, std::memory_order_relaxed);
}

// "Name count\n" for every declared entry, into buf (at most n bytes, NUL-terminated when n > 0);
// returns the length of the whole text, so a caller can size its buffer.
extern "C" __attribute__((visibility("default"))) size_t OnnxMaskedRnnKernelApiCalls(char* buf,
                                                                                     size_t n) {
  std::string text;
  for (size_t i = 0; i < static_cast<size_t>(OrtApiEntry::kCount); ++i) {
    text += kEntryNames[i];
    text += ' ';
    text += std::to_string(g_calls[i].load(std::memory_order_relaxed));
    text += '\n';
  }
  if (buf != nullptr && n > 0) {
    size_t k = text.size() < n - 1 ? text.size() : n - 1;
    std::memcpy(buf, text.data(), k);
    buf[k] = '\0';
  }
  return text.size();
}
