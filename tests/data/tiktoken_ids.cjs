// tiktoken_ids.cjs TIKTOKEN_DIR FILE OUT: FILE (UTF-8) encoded with
// tiktoken's gpt2 encoding (encode_ordinary), one id a line into OUT; the
// encoding's seconds on stderr.
const fs = require('fs');
const { get_encoding } = require(process.argv[2] + '/tiktoken.cjs');
const enc = get_encoding('gpt2');
const text = fs.readFileSync(process.argv[3], 'utf8');
const t0 = process.hrtime.bigint();
const ids = enc.encode_ordinary(text);
const t1 = process.hrtime.bigint();
process.stderr.write(`${Number(t1 - t0) / 1e9}\n`);
fs.writeFileSync(process.argv[4], Array.from(ids).join('\n') + '\n');
enc.free();
