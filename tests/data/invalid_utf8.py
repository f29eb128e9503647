# invalid_utf8.py SEED DIR: text of valid UTF-8 segments (from
# unicode_text.py) joined by runs of bytes that are not UTF-8 (lone
# continuation bytes, 0xC0/0xC1/0xF5..0xFF, sequences cut short, encoded
# surrogates, overlong forms). Writes DIR/all.bin (the whole), DIR/seg-K.txt
# (each valid segment) and DIR/bad-K.bin (each run).
import os, random, subprocess, sys
seed, d = int(sys.argv[1]), sys.argv[2]
random.seed(seed)
here = os.path.dirname(os.path.abspath(__file__))
text = subprocess.run([sys.executable, f"{here}/unicode_text.py", "3000", str(seed)],
                      capture_output=True, check=True).stdout
bads = [b"\x80", b"\xbf\xbf", b"\xc0\xaf", b"\xc1", b"\xf5\x80\x80\x80", b"\xff", b"\xfe\xff",
        b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xe0\x80\xaf", b"\xc3"]
# cut the text at character boundaries into segments
chars = text.decode("utf-8")
cuts = sorted(random.sample(range(1, len(chars)), 40))
segs = [chars[a:b] for a, b in zip([0] + cuts, cuts + [len(chars)])]
out = b""
for k, s in enumerate(segs):
    e = s.encode("utf-8")
    open(f"{d}/seg-{k}.txt", "wb").write(e)
    out += e
    if k + 1 < len(segs):
        bad = b"".join(random.choice(bads) for _ in range(random.randint(1, 3)))
        open(f"{d}/bad-{k}.bin", "wb").write(bad)
        out += bad
open(f"{d}/all.bin", "wb").write(out)
print(len(segs))
