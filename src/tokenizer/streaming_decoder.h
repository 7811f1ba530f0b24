#pragma once
// Turns generated token ids into text as they arrive, never handing out part of a UTF-8
// character: a byte token (<0xE2>) or a BPE piece may end mid-character, so the tail waits for the
// next ids. Bytes that can never form a character come out as U+FFFD (one per maximal invalid
// subsequence, as Python's errors="replace"), so everything returned is valid UTF-8.
//
//   StreamingDecoder decoder(tokenizer);
//   for (int32_t id : generated) std::cout << decoder.feed(id);
//   std::cout << decoder.finish();

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer {

class Tokenizer;

class StreamingDecoder {
  public:
    // The tokenizer must outlive the decoder.
    explicit StreamingDecoder(const Tokenizer& tokenizer, bool show_special = false);

    // Appends the token's piece; returns the text that is now complete. Throws UsageError for an
    // id out of range (and then changes nothing).
    std::string feed(int32_t id);
    // Raw bytes instead of a token (tests, and callers with their own pieces).
    std::string feed_bytes(std::string_view bytes);
    // Ends the stream: an incomplete character left over becomes U+FFFD.
    std::string finish();
    // Bytes held back, waiting for the rest of their character.
    std::size_t pending() const { return pending_.size(); }
    void reset() { pending_.clear(); }

  private:
    const Tokenizer* tokenizer_;
    bool show_special_;
    std::string pending_;
};

// Replaces invalid UTF-8 with U+FFFD, one per maximal invalid subsequence.
std::string sanitize_utf8(std::string_view bytes);

}  // namespace minfer
