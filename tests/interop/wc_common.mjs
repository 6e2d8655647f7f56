// Helpers shared by the independent WebCrypto implementation's parts (docs/PROTOCOL.md §1):
// strict base64url, strict JSON with the document's extra rules, byte helpers, typed errors.
// JavaScript built-ins and WebCrypto only; no npm packages.

export const subtle = globalThis.crypto.subtle;
export const enc = new TextEncoder();
export const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export class ProtoError extends Error {
  constructor(code, field, message) {
    super(message || code);
    this.code = code;
    this.field = field ?? null;
  }
}
export const fail = (code, field, message) => { throw new ProtoError(code, field, message); };

// -- base64url (RFC 4648 §5), strict: no padding, no other characters, unused bits zero ----------
const ALPH = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const INDEX = new Map([...ALPH].map((c, i) => [c, i]));

export function b64uDecode(text, field) {
  if (typeof text !== "string") fail("base64_invalid", field, "not a string");
  if (text.length % 4 === 1) fail("base64_invalid", field, "impossible length");
  const out = new Uint8Array(Math.floor((text.length * 3) / 4));
  let acc = 0, bits = 0, j = 0;
  for (let i = 0; i < text.length; i++) {
    const v = INDEX.get(text[i]);
    if (v === undefined) fail("base64_invalid", field, "character outside the alphabet");
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[j++] = (acc >> bits) & 0xff;
    }
    acc &= (1 << bits) - 1;
  }
  if (acc !== 0) fail("base64_invalid", field, "non-canonical (unused bits set)");
  return out;
}

export function b64uEncode(bytes) {
  let out = "", acc = 0, bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += ALPH[(acc >> bits) & 63];
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out += ALPH[(acc << (6 - bits)) & 63];
  return out;
}

export const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
};
export const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
export const sha256 = async (data) => new Uint8Array(await subtle.digest("SHA-256", data));
export const keyId = async (spkiDer) => b64uEncode(await sha256(spkiDer));

// -- strict JSON (RFC 8259) with the document's extra rules --------------------------------------
// Syntax errors (and invalid UTF-8) are `malformed`; then one value followed by anything but
// whitespace is trailing_data; then a repeated member name is duplicate_member.
export function parseStrict(bytes, field, malformed) {
  let text;
  try { text = utf8.decode(bytes); } catch { fail(malformed, field, "not UTF-8"); }
  let i = 0, duplicate = null;
  const ws = () => { while (i < text.length && " \t\n\r".includes(text[i])) i++; };
  const bad = (why) => fail(malformed, field, `JSON: ${why} at ${i}`);
  function value(depth) {
    if (depth > 500) bad("nested too deeply");
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj = Object.create(null);
      ws();
      if (text[i] === "}") { i++; return obj; }
      for (;;) {
        ws();
        if (text[i] !== '"') bad("member name expected");
        const name = string();
        if (name in obj && duplicate === null) duplicate = name;
        ws();
        if (text[i++] !== ":") bad("':' expected");
        obj[name] = value(depth + 1);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return obj; }
        bad("',' or '}' expected");
      }
    }
    if (c === "[") {
      i++;
      const arr = [];
      ws();
      if (text[i] === "]") { i++; return arr; }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return arr; }
        bad("',' or ']' expected");
      }
    }
    if (c === '"') return string();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
    }
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!m) bad("value expected");
    i += m[0].length;
    // A fraction or exponent makes a non-integer: kept apart so that an "int" member refuses it.
    return m[2] || m[3] ? { float: Number(m[0]) } : Number(m[0]);
  }
  function string() {
    i++; // opening quote
    let out = "";
    for (;;) {
      if (i >= text.length) bad("unterminated string");
      const c = text[i++];
      if (c === '"') return out;
      if (c < " ") bad("control character in string");
      if (c !== "\\") { out += c; continue; }
      const e = text[i++];
      const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" }[e];
      if (simple !== undefined) { out += simple; continue; }
      if (e !== "u" || !/^[0-9a-fA-F]{4}$/.test(text.slice(i, i + 4))) bad("bad escape");
      out += String.fromCharCode(parseInt(text.slice(i, i + 4), 16));
      i += 4;
    }
  }
  const result = value(0);
  ws();
  if (i !== text.length) fail("trailing_data", field, "bytes follow the JSON value");
  if (duplicate !== null) {
    const err = new ProtoError("duplicate_member", field, `member ${duplicate} repeated`);
    err.member = duplicate;
    throw err;
  }
  return result;
}

// Exact shape: all members present, no others, of the given types ("str", "int", [..], {...}).
export function checkShape(v, shape, field, code) {
  if (shape === "str") { if (typeof v !== "string") fail(code, field, "string expected"); return; }
  if (shape === "int") { if (typeof v !== "number" || !Number.isInteger(v)) fail(code, field, "integer expected"); return; }
  if (Array.isArray(shape)) {
    if (!Array.isArray(v)) fail(code, field, "array expected");
    for (const x of v) checkShape(x, shape[0], field, code);
    return;
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) fail(code, field, "object expected");
  const want = Object.keys(shape), got = Object.keys(v);
  for (const k of got) if (!want.includes(k)) fail(code, field, `unknown member ${k}`);
  for (const k of want) {
    if (!(k in v)) fail(code, field, `missing member ${k}`);
    checkShape(v[k], shape[k], field, code);
  }
}

export const ID_RE = /^[A-Za-z0-9._-]{1,64}$/;
export const KID_RE = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
export const MAX_SAFE = Number.MAX_SAFE_INTEGER;

export function checkKid(kid, field) {
  if (!KID_RE.test(kid)) {
    if (kid.length !== 43) fail("envelope_malformed", field, "a key id or hash is 43 characters");
    b64uDecode(kid, field);
  }
}
