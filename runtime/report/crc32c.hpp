#pragma once

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing that
// TensorBoard's event files use. A table-driven byte-at-a-time version: event files are a few
// kB per step, so speed does not matter here.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace asyncrl {

/// CRC-32C of `data`; crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::string_view data);

/// The CRC as TFRecord stores it: rotated right by 15 bits plus 0xa282ead8, so that a CRC of
/// bytes that themselves hold CRCs does not degenerate (TensorFlow's crc32c::Mask).
uint32_t masked_crc32c(std::string_view data);

}  // namespace asyncrl
