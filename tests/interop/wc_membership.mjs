// The membership log (docs/PROTOCOL.md §12), written from the document with WebCrypto only:
// parse a signed statement (canonical JSON), verify a log statement by statement (link, actor,
// key, Ed25519 signature, policy), detect forks, and check an envelope's ep/mh/snd/rkids.

import {
  MAX_SAFE, b64uDecode, b64uEncode, enc, fail, keyId, parseStrict, sha256, subtle,
} from "./wc_common.mjs";

const CONTEXT = "e2ee-chat/v1/membership";
const OPS = ["create", "add", "remove", "title", "admins", "update"];
const CID_RE = /^[A-Za-z0-9._-]{1,64}$/;
const USER_RE = /^[a-z0-9][a-z0-9_.-]{2,31}$/;
const KID_RE = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
const BODY_KEYS = ["actor", "admins", "akid", "cid", "ep", "members", "op", "prev", "title", "ts", "typ", "v"];

const bad = (message, field) => fail("statement_malformed", field, message);

// RFC 8785 (JCS) for the values a statement holds: sorted keys, no whitespace.
export function canonicalize(v) {
  if (Array.isArray(v)) return `[${v.map(canonicalize).join(",")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalize(v[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

const isInt = (x) => typeof x === "number" && Number.isInteger(x);
const isStr = (x) => typeof x === "string";
const sameKeys = (o, keys) => o !== null && typeof o === "object" && !Array.isArray(o) &&
  Object.keys(o).length === keys.length && keys.every((k) => k in o);
const sorted = (names) => names.every((x, i) => i === 0 || names[i - 1] < x);

function checkShape(b) {
  const ok = sameKeys(b, BODY_KEYS) && isStr(b.actor) && isStr(b.akid) && isStr(b.cid) && isInt(b.ep) &&
    isStr(b.op) && isStr(b.title) && isInt(b.ts) && isStr(b.typ) && isInt(b.v) &&
    (b.prev === null || isStr(b.prev)) && (b.admins === null || (Array.isArray(b.admins) && b.admins.every(isStr))) &&
    Array.isArray(b.members) && b.members.every((m) => sameKeys(m, ["sk", "u", "wk"]) && isStr(m.sk) &&
      isStr(m.u) && isStr(m.wk));
  if (!ok) bad("body is not a statement", "body");
}

function checkBody(b) {
  if (b.v !== 1 || b.typ !== "e2ee-chat/membership") bad("v/typ", "v");
  if (!OPS.includes(b.op)) bad("op", "op");
  if (!CID_RE.test(b.cid)) bad("cid", "cid");
  if (!(b.ep >= 0 && b.ep <= MAX_SAFE && b.ts >= 0 && b.ts <= MAX_SAFE)) bad("ep/ts", "ep");
  if (!USER_RE.test(b.actor)) bad("actor", "actor");
  if (!KID_RE.test(b.akid)) bad("akid", "akid");
  if (b.prev !== null && !KID_RE.test(b.prev)) bad("prev", "prev");
  if (b.members.length < 1 || b.members.length > 256) bad("members count", "members");
  for (const m of b.members) {
    if (!USER_RE.test(m.u) || !KID_RE.test(m.wk) || !KID_RE.test(m.sk)) bad("member entry", "members");
  }
  const names = b.members.map((m) => m.u);
  if (!sorted(names)) bad("members not sorted", "members");
  if (new Set(b.members.map((m) => m.wk)).size !== b.members.length) bad("wrap key shared", "members");
  if (b.admins !== null && (!sorted(b.admins) || !b.admins.every((a) => names.includes(a)))) bad("admins", "admins");
  const chars = [...b.title].length;
  if (chars < 1 || chars > 200 || CONTROL_RE.test(b.title)) bad("title", "title");
}

// A signed form -> {cid, ep, op, actor, akid, members: [{u, wk, sk}], admins, title, prev, ts, signed, hash, ...}
export async function parseStatement(signed) {
  if (typeof signed !== "string" || !/^[\x00-\x7f]*$/.test(signed)) bad("not ASCII", "statement");
  if (signed.length > 65536) bad("too large", "statement");
  const parts = signed.split(".");
  if (parts.length !== 2) bad("not body.signature", "statement");
  const body = b64uDecode(parts[0], "body");
  const sig = b64uDecode(parts[1], "sig");
  if (sig.length !== 64) bad("sig is not 64 bytes", "sig");
  let b;
  try { b = parseStrict(body, "body", "statement_malformed"); } catch { bad("body is not JSON", "body"); }
  checkShape(b);
  const canonical = enc.encode(canonicalize(b));
  if (canonical.length !== body.length || canonical.some((x, i) => x !== body[i])) bad("not canonical", "body");
  checkBody(b);
  return { ...b, signed, bodyB64: parts[0], sig, hash: b64uEncode(await sha256(enc.encode(signed))) };
}

export async function signStatement(actor, fields) {
  const body = { v: 1, typ: "e2ee-chat/membership", actor: actor.username, akid: actor.signKid, ...fields };
  const bodyB64 = b64uEncode(enc.encode(canonicalize(body)));
  const sig = new Uint8Array(await subtle.sign({ name: "Ed25519" }, actor.signPrivate,
    enc.encode(`${CONTEXT}.${bodyB64}`)));
  return parseStatement(`${bodyB64}.${b64uEncode(sig)}`);
}

const member = (st, name) => st.members.find((m) => m.u === name) ?? null;
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function checkLink(prev, st, cid) {
  if (st.cid !== cid) fail("conversation_mismatch", "cid");
  let basis = prev;
  if (prev === null) {
    if (st.ep !== 0 || st.op !== "create") fail("epoch_skipped", "ep");
    if (st.prev !== null) fail("chain_broken", "prev");
    basis = st;
  } else {
    if (st.ep !== prev.ep + 1) fail("epoch_skipped", "ep");
    if (st.prev !== prev.hash) fail("chain_broken", "prev");
  }
  const entry = member(basis, st.actor);
  if (entry === null) fail("actor_not_member", "actor");
  if (st.akid !== entry.sk) fail("actor_key_mismatch", "akid");
}

function checkPolicy(prev, st) {
  const before = new Map(prev.members.map((m) => [m.u, m]));
  const after = new Map(st.members.map((m) => [m.u, m]));
  const may = prev.admins === null || prev.admins.includes(st.actor);
  const subset = (a, b) => [...a.keys()].every((k) => b.has(k));
  const strict = (a, b) => subset(a, b) && a.size < b.size;
  const sameSet = subset(before, after) && subset(after, before);
  let ok = [...before.keys()].filter((u) => after.has(u))
    .every((u) => (st.op === "update" && u === st.actor) || same(before.get(u), after.get(u)));
  if (st.op !== "title" && st.title !== prev.title) ok = false;
  if (st.op === "add") {
    ok = ok && strict(before, after) && same(st.admins, prev.admins) && may;
  } else if (st.op === "remove") {
    const gone = [...before.keys()].filter((u) => !after.has(u));
    const expected = prev.admins === null ? null : prev.admins.filter((a) => after.has(a));
    ok = ok && strict(after, before) && same(st.admins, expected) && (may || same(gone, [st.actor]));
  } else if (st.op === "title") {
    ok = ok && sameSet && same(st.admins, prev.admins) && st.title !== prev.title && may;
  } else if (st.op === "admins") {
    ok = ok && sameSet && !same(st.admins, prev.admins) && may;
  } else if (st.op === "update") {
    ok = ok && sameSet && same(st.admins, prev.admins) && !same(before.get(st.actor), after.get(st.actor));
  } else {
    ok = false;
  }
  if (!ok) fail("policy_violation", "op");
}

// key = {kid, key (CryptoKey Ed25519 public)}
export async function verifyNext(prev, st, key, cid) {
  checkLink(prev, st, cid);
  if (key.kid !== st.akid) fail("actor_key_mismatch", "akid");
  if (!(await subtle.verify({ name: "Ed25519" }, key.key, st.sig, enc.encode(`${CONTEXT}.${st.bodyB64}`)))) {
    fail("statement_signature_invalid", "sig");
  }
  if (prev !== null) checkPolicy(prev, st);
}

export function detectFork(a, b) {
  if (a.cid === b.cid && a.ep === b.ep && a.hash !== b.hash) fail("membership_fork", "ep");
}

export class Chain {
  constructor(cid) { this.cid = cid; this.statements = []; }
  get head() { return this.statements.at(-1) ?? null; }
  at(ep) { return ep >= 0 && ep < this.statements.length ? this.statements[ep] : null; }
  // resolve(username, signKid) -> {kid, key}
  async extend(statements, resolve) {
    for (const st of statements) {
      const known = st.cid === this.cid ? this.at(st.ep) : null;
      if (known !== null) { detectFork(known, st); continue; }
      checkLink(this.head, st, this.cid);
      await verifyNext(this.head, st, await resolve(st.actor, st.akid), this.cid);
      this.statements.push(st);
    }
  }
}

export function checkContinuity(chain, ep, hash) {
  const st = chain.at(ep);
  if (st === null || st.hash !== hash) fail("membership_fork", "ep");
}

export function checkAudience(chain, h) {
  const st = chain.at(h.ep);
  if (st === null) fail("epoch_mismatch", "ep");
  if (st.hash !== h.mh) fail("epoch_mismatch", "mh");
  if (member(st, h.snd) === null) fail("audience_mismatch", "snd");
  if (!same(h.rkids, st.members.map((m) => m.wk))) fail("audience_mismatch", "rkids");
  return st;
}

// The Ed25519 public key of a raw 32-byte private seed (WebCrypto imports seeds only as PKCS#8).
export async function ed25519FromSeed(seed) {
  const pkcs8 = new Uint8Array([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
    0x04, 0x20, ...seed]);
  const priv = await subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, true, ["sign"]);
  const raw = b64uDecode((await subtle.exportKey("jwk", priv)).x, "x");
  const key = await subtle.importKey("raw", raw, { name: "Ed25519" }, true, ["verify"]);
  const spki = new Uint8Array(await subtle.exportKey("spki", key));
  return { kid: await keyId(spki), key };
}
