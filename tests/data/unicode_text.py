# unicode_text.py N SEED: N pieces of text for the tokenizer tests: words
# in many scripts, digits, contractions, punctuation, white space of every
# kind (U+0085, U+2028, U+3000 among it), emoji and combining marks, and
# random code points assigned in Python's Unicode (its unicodedata).
import random, sys, unicodedata
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
pools = [
  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  ", "\n", "\t", "\r\n",
  "'s 't 're 've 'm 'll 'd 'S 'T 'RE", ".,;:!?-()[]{}\"'`~@#$%^&*_+=|\\/<>",
  "你好世界中文字符测试", "مرحبا بالعالم", "Привет мир", "γειά σου κόσμε", "こんにちは世界", "안녕하세요",
  "😀🚀🎉👍🏽👨‍👩‍👧", "éèêëàâäôöûüç", "e\u0301a\u0308", "\u0085", "\u2028\u2029", "\u00a0\u3000\u2003",
  "٠١٢٣٤٥٦٧٨٩", "Ⅻ½²³", "\u200b\u200d", "\ufeff", "\U0001d400\U0001d7d8", "ﬁﬂ", "ǅǈ",
]
out = []
for _ in range(int(sys.argv[1])):
    p = random.choice(pools)
    k = random.randint(1, 6)
    out.append("".join(random.choice(p) for _ in range(k)) if len(p) > 3 and random.random() < 0.5 else p)
    if random.random() < 0.3:
        out.append(" " * random.randint(1, 4))
# random code points from the BMP and beyond, skipping surrogates
for _ in range(int(sys.argv[1]) // 4):
    cp = random.choice([random.randint(0x20, 0x2FFF), random.randint(0x3000, 0xD7FF), random.randint(0xE000, 0xFFFD), random.randint(0x10000, 0x2FFFF)])
    if unicodedata.category(chr(cp)) == "Cn":  # not in Python's Unicode (14.0): skip
        continue
    out.append(chr(cp))
    if random.random() < 0.2: out.append(" ")
random.shuffle(out)
sys.stdout.write("".join(out))
