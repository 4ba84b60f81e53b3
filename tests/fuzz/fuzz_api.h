/* The libFuzzer entry point, shared by the fuzzer and the corpus replay. */
#ifndef TSLAB_FUZZ_API_H
#define TSLAB_FUZZ_API_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len);

#endif
