"""One secret in two Unicode normal forms (tests of RFC 8265 normalisation)."""

COMPOSED = "caf\u00e9 \u00fcber"  # é and ü as one code point each
DECOMPOSED = "cafe\u0301 u\u0308ber"  # e + U+0301, u + U+0308
