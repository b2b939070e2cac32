// Unicode normalization of a text before tokenization (Hugging Face tokenizers' `normalizer` step).
#pragma once

#include <string>
#include <string_view>

namespace posenc {

/// The text in Unicode Normalization Form C (canonical decomposition, then canonical composition: "e" U+0301
/// becomes U+00E9). Every maximal run of valid UTF-8 (RFC 3629) is normalized on its own; a byte that is not
/// part of a valid sequence is kept as it is, in place (Hugging Face tokenizers never see such bytes: a Python
/// str is always valid). A run of ASCII is its own NFC and is copied.
/// Complexity: O(n) in the byte length. Errors: none (a valid run always normalizes).
/// Source: Unicode Standard Annex #15 (Normalization Forms), through utf8proc's `utf8proc_map` with
/// UTF8PROC_STABLE | UTF8PROC_COMPOSE; Hugging Face tokenizers normalizers/unicode.rs `NFC`.
std::string NormalizeNfc(std::string_view text);

}  // namespace posenc
