# gpt2_bytes.py: GPT-2's byte-to-character map, written here from its
# definition (the printable Latin-1 bytes as themselves, the other 68 as
# U+0100 + n in byte order), for the tokenizer tests' Python checks.
import json

ORDER = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
ORDER += [c for c in range(256) if c not in ORDER]  # GPT-2's byte ids: printable first
CP_OF = {}
_n = 0
for _b in ORDER:
    if _b in range(33, 127) or _b in range(161, 173) or _b in range(174, 256):
        CP_OF[_b] = _b
    else:
        CP_OF[_b] = 256 + _n
        _n += 1
BYTE_OF = {chr(c): b for b, c in CP_OF.items()}


def mapped(t):
    """bytes -> their text in the map"""
    return "".join(chr(CP_OF[x]) for x in t)


def decoder(encoder_json):
    """id -> bytes, from an encoder.json"""
    return {i: bytes(BYTE_OF[ch] for ch in s)
            for s, i in json.load(open(encoder_json, encoding="utf-8")).items()}
