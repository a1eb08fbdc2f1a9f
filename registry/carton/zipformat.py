"""The pieces of the zip format (PKWARE APPNOTE) that the reader and the writer share."""

from __future__ import annotations

import struct

STORED, DEFLATED, ZSTD = 0, 8, 93
METHOD_NAMES = {STORED: "Stored", DEFLATED: "Deflate", ZSTD: "zstd"}
"""The compression methods a carton may use (anything else is rejected on open)."""

LOCAL_MAGIC = b"PK\x03\x04"
LOCAL_HEADER = struct.Struct("<4s5H3L2H")
"""Local file header: magic, version, flags, method, time, date, crc, sizes, name/extra lengths."""
