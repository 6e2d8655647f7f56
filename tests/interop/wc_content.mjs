// Content documents (docs/PROTOCOL.md §13), written from the document: the typed plaintext of a v3
// envelope, canonical JSON padded with spaces to a Padmé or power-of-two bucket, decoded strictly.
// JavaScript built-ins only.

import { MAX_SAFE, ProtoError, b64uDecode, enc, fail, parseStrict } from "./wc_common.mjs";

export const MAX_CONTENT_BYTES = 65536;
const MIN_BUCKET = 256;
const HOUR_MS = 3600000;
const MIN_CHUNK = 1024, MAX_CHUNK = 4 * 1024 * 1024;

const BASE = { ts: "int", ctr: "int" };
const ATT = { id: "str", key: "str", name: "str", type: "str", size: "int", sha256: "str", chunk: "int" };
const KINDS = {
  text: { body: "str" },
  reply: { body: "str", ref: "str" },
  edit: { body: "str", ref: "str" },
  delete: { ref: "str" },
  react: { ref: "str", emoji: "str", on: "bool" },
  read: { ref: "str", upto: "int" },
  attachment: { att: ATT, body: "str" },
  expire: { seconds: "int" },
  title: { title: "str" },
};

const bad = (field, why) => fail("content_invalid", field, why);

// Padmé (Nikitin et al., PETS 2019) or powers of two, at least 256 bytes.
export function bucket(length, scheme) {
  if (length <= MIN_BUCKET) return MIN_BUCKET;
  if (scheme === "pow2") return 2 ** Math.ceil(Math.log2(length));
  const e = 31 - Math.clz32(length);          // floor(log2 L)
  const s = 32 - Math.clz32(e);               // floor(log2 E) + 1
  const mask = (1 << (e - s)) - 1;
  return (length + mask) & ~mask;
}

export const expiryHint = (exp) => Math.ceil(exp / HOUR_MS) * HOUR_MS;

function shape(v, want, prefix) {
  for (const k of Object.keys(v)) if (!(k in want)) bad(prefix + k, `unknown member ${k}`);
  for (const [k, type] of Object.entries(want)) {
    const name = prefix + k;
    if (!(k in v)) bad(name, `missing member ${k}`);
    const x = v[k];
    if (type === "str" && typeof x !== "string") bad(name, "string expected");
    if (type === "int" && !(typeof x === "number" && Number.isInteger(x))) bad(name, "integer expected");
    if (type === "bool" && typeof x !== "boolean") bad(name, "boolean expected");
    if (typeof type === "object") {
      if (x === null || typeof x !== "object" || Array.isArray(x)) bad(name, "object expected");
      shape(x, type, name + ".");
    }
    if (typeof x === "string" && !x.isWellFormed()) bad(name, "lone surrogate");
  }
}

const CONTROL = /[\x00-\x1f\x7f-\x9f]/;
const inRange = (x, lo, hi = MAX_SAFE) => x >= lo && x <= hi;
const codePoints = (s) => [...s].length;
function b64Bytes(value, n, field) {
  let raw;
  try { raw = b64uDecode(value, field); } catch { bad(field, "not base64url"); }
  if (raw.length !== n) bad(field, `must encode ${n} bytes`);
}

// The rules of §13.1 on a document already of the right shape.
function check(d) {
  if (!inRange(d.ts, 0)) bad("ts", "range");
  if (!inRange(d.ctr, 1)) bad("ctr", "range");
  if (!inRange(d.exp, 0)) bad("exp", "range");
  if ("ref" in d) {
    if (d.ref.length !== 22) bad("ref", "a message id is 22 characters");
    b64Bytes(d.ref, 16, "ref");
  }
  if (["text", "reply", "edit"].includes(d.t) && d.body === "") bad("body", "empty");
  if (d.t === "attachment") {
    const a = d.att;
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(a.id)) bad("att.id", "id");
    if (!/^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/.test(a.sha256)) bad("att.sha256", "43 characters");
    b64Bytes(a.key, 32, "att.key");
    if (!inRange(codePoints(a.name), 1, 255) || CONTROL.test(a.name) || a.name === "." || a.name === "..") bad("att.name", "name");
    if (a.name.includes("/") || a.name.includes("\\")) bad("att.name", "a path");
    if (!/^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}$/.test(a.type)) bad("att.type", "type");
    if (!inRange(a.size, 0)) bad("att.size", "range");
    if (!inRange(a.chunk, MIN_CHUNK, MAX_CHUNK)) bad("att.chunk", "range");
  }
  if (d.t === "react") {
    if (!inRange(codePoints(d.emoji), 1, 16) || enc.encode(d.emoji).length > 64) bad("emoji", "length");
    if (/[\x00-\x20\x7f-\x9f\s]/u.test(d.emoji)) bad("emoji", "whitespace or control");
  }
  if (d.t === "read" && !inRange(d.upto, 0)) bad("upto", "range");
  if (d.t === "expire" && !inRange(d.seconds, 0, 366 * 86400)) bad("seconds", "range");
  if (d.t === "title" && (!inRange(codePoints(d.title), 1, 200) || CONTROL.test(d.title))) bad("title", "title");
}

// Strip the padding (trailing spaces) and parse strictly. Returns the document with exp (0 if absent).
export function decodeContent(bytes) {
  if (bytes.length > MAX_CONTENT_BYTES) fail("content_too_large", "content");
  let end = bytes.length;
  while (end > 0 && bytes[end - 1] === 0x20) end--;
  const text = bytes.subarray(0, end);
  if (text[0] !== 0x7b || text[end - 1] !== 0x7d) bad("content", "one JSON object followed only by spaces");
  let doc;
  try { doc = parseStrict(text, "content", "content_invalid"); } catch (err) {
    if (err instanceof ProtoError && err.code === "duplicate_member") bad(err.member, "repeated member");
    if (err instanceof ProtoError) bad("content", err.message);
    throw err;
  }
  if (typeof doc.t !== "string" || !(doc.t in KINDS)) bad("t", "unknown kind");
  const { t, exp, ...rest } = doc;
  if (exp !== undefined && !(typeof exp === "number" && Number.isInteger(exp))) bad("exp", "integer expected");
  shape(rest, { ...KINDS[t], ...BASE }, "");
  const out = { ...doc, exp: exp ?? 0 };
  check(out);
  return out;
}

function canonical(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

// Canonical JSON (sorted members, exp left out when 0) padded with spaces to its bucket.
export function encodeContent(doc, scheme = "padme") {
  const { exp, ...rest } = doc;
  const body = enc.encode(canonical(exp ? { ...rest, exp } : rest));
  if (body.length > MAX_CONTENT_BYTES) fail("content_too_large", "body");
  const out = new Uint8Array(bucket(body.length, scheme)).fill(0x20);
  out.set(body);
  return out;
}

export const canonicalContent = (doc) => {
  const { exp, ...rest } = doc;
  return canonical(exp ? { ...rest, exp } : rest);
};
