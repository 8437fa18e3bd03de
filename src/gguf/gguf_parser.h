// Internal: fills a GgufFile from its mapped bytes, validating everything against the file size.
#pragma once

#include "gguf/gguf_file.h"

namespace specdec::gguf {

class GgufParser {
 public:
  // Parses file.base_[0, file.size_) into file's metadata and tensor tables; throws
  // specdec::Error (message starts with the path) on the first problem found.
  static void parse(GgufFile& file);
};

}  // namespace specdec::gguf
