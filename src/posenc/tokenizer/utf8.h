// UTF-8 helpers shared by the tokenizer families: sequence lengths, validation, whitespace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace posenc {

/// Length of the UTF-8 sequence a lead byte announces, from its high bits: 0xxxxxxx and 10xxxxxx -> 1,
/// 110xxxxx -> 2, 1110xxxx -> 3, 11110xxx and 11111xxx -> 4. No validation: a stray continuation byte or an
/// invalid lead counts as one unit or as the announced length.
/// Source: llama.cpp unicode.cpp `unicode_len_utf8` (the SPM tokenizer splits text into symbols this way).
size_t Utf8LeadLength(unsigned char lead);

/// Length of the valid UTF-8 sequence starting at text[pos] (1 to 4), or 0 if the bytes there are not one
/// (bad lead, missing or wrong continuation, overlong form, surrogate, or above U+10FFFF: RFC 3629).
size_t ValidUtf8Length(std::string_view text, size_t pos);

/// Byte length of the valid UTF-8 prefix of text (text.size() if all of it is valid).
size_t ValidUtf8Prefix(std::string_view text);

/// Appends the UTF-8 encoding of code point cp (cp <= 0x10FFFF, not a surrogate; unchecked).
void AppendUtf8(uint32_t cp, std::string& out);

/// Decodes the valid sequence of length n (from ValidUtf8Length) at text[pos].
uint32_t DecodeUtf8(std::string_view text, size_t pos, size_t n);

/// Whether cp has the Unicode White_Space property (Rust `char::is_whitespace`, used by Hugging Face
/// tokenizers for added-token lstrip / rstrip).
bool IsUnicodeWhitespace(uint32_t cp);

}  // namespace posenc
