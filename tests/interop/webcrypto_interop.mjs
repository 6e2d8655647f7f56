// An independent e2ee-chat protocol implementation, written from docs/PROTOCOL.md, using only the
// JavaScript built-ins and WebCrypto (globalThis.crypto.subtle); no npm packages. Node >= 20.
//
//   node webcrypto_interop.mjs <vectors-dir> <l3-challenge-b64url>
//
// It reads the committed vectors, checks every rule it can (key ids, safety numbers, L4 open of
// each positive vector by each recipient, the same named error for each negative vector, L3
// handshake and messages), then seals an L4 envelope and an L3 handshake + message for the Python
// side to open. Prints one JSON object: {"checks": [{name, ok, detail}], "produced": {...}}.

import { readFileSync } from "node:fs";
import { join } from "node:path";

import {
  MAX_SAFE, ID_RE, ProtoError, b64uDecode, b64uEncode, checkKid, checkShape, concat, enc, equal, fail, keyId,
  parseStrict, sha256, subtle,
} from "./wc_common.mjs";
import { bucket, canonicalContent, decodeContent, encodeContent, expiryHint } from "./wc_content.mjs";
import {
  Chain, checkAudience, checkContinuity, detectFork, ed25519FromSeed, parseStatement, signStatement,
} from "./wc_membership.mjs";

// -- L4 (docs/PROTOCOL.md §5) --------------------------------------------------------------------
const ENVELOPE = {
  protected: "str", recipients: [{ header: { kid: "str" }, encrypted_key: "str" }],
  iv: "str", ciphertext: "str", tag: "str", sig: "str",
};
const HEADER = {
  alg: "str", enc: "str", typ: "str", cty: "str", v: "int", mid: "str", cid: "str", snd: "str",
  skid: "str", xp: "int", ep: "int", mh: "str", kc: "str", rkids: ["str"],
};
const KC_CONTEXT = enc.encode("e2ee-chat/v3/key-commitment");
const CTY = "application/e2ee-chat+json";

async function keyCommitment(cek) {
  const mac = await subtle.importKey("raw", cek, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle.sign("HMAC", mac, KC_CONTEXT));
}

// Compare without an early exit (the time does not depend on where the first difference is).
const sameBytes = (a, b) => a.length === b.length && a.reduce((d, x, i) => d | (x ^ b[i]), 0) === 0;

function parseL4(bytes, maxBytes = 256 * 1024, maxRecipients = 256) {
  if (bytes.length > maxBytes) fail("envelope_too_large", "envelope");
  const env = parseStrict(bytes, "envelope", "envelope_malformed");
  checkShape(env, ENVELOPE, "envelope", "envelope_malformed");
  if (env.recipients.length === 0) fail("recipient_list_invalid", "recipients");
  if (env.recipients.length > maxRecipients) fail("too_many_recipients", "recipients");
  const headerBytes = b64uDecode(env.protected, "protected");
  const h = parseStrict(headerBytes, "protected", "envelope_malformed");
  try {
    checkShape(h, HEADER, "protected", "envelope_malformed");
  } catch (err) {  // a v1 or v2 header is refused as that version (§2), whatever its members
    if (h !== null && typeof h === "object" && (h.v === 1 || h.v === 2)) fail("unsupported_algorithm", "v");
    throw err;
  }
  if (h.alg !== "RSA-OAEP-256" || h.enc !== "A256GCM") fail("unsupported_algorithm", "alg");
  if (h.typ !== "e2ee-chat/msg" || h.v !== 3) fail("unsupported_algorithm", "v");
  if (h.cty !== CTY) fail("unsupported_algorithm", "cty");
  if (b64uDecode(h.mid, "mid").length !== 16) fail("envelope_malformed", "mid");
  if (!ID_RE.test(h.cid)) fail("envelope_malformed", "cid");
  if (!ID_RE.test(h.snd)) fail("envelope_malformed", "snd");
  checkKid(h.skid, "skid");
  if (!(h.xp >= 0 && h.xp <= MAX_SAFE && h.xp % 3600000 === 0)) fail("envelope_malformed", "xp");
  if (!(h.ep >= 0 && h.ep <= MAX_SAFE)) fail("envelope_malformed", "ep");
  checkKid(h.mh, "mh");
  checkKid(h.kc, "kc");
  const kids = env.recipients.map((r) => r.header.kid);
  if (new Set(kids).size !== kids.length || new Set(h.rkids).size !== h.rkids.length) {
    fail("recipient_duplicated", "recipients");
  }
  if (kids.length !== h.rkids.length || kids.some((k, n) => k !== h.rkids[n])) fail("recipient_list_invalid", "recipients");
  for (const k of kids) checkKid(k, "kid");
  const iv = b64uDecode(env.iv, "iv");
  if (iv.length !== 12) fail("nonce_invalid", "iv");
  const tag = b64uDecode(env.tag, "tag");
  if (tag.length !== 16) fail("tag_invalid", "tag");
  const sig = b64uDecode(env.sig, "sig");
  if (sig.length !== 64) fail("signature_invalid", "sig");
  const ciphertext = b64uDecode(env.ciphertext, "ciphertext");
  const wrapped = env.recipients.map((r) => b64uDecode(r.encrypted_key, "encrypted_key"));
  return { env, h, iv, tag, sig, ciphertext, wrapped };
}

const signingInput = (env) => enc.encode(["e2ee-chat/v3/sig", env.protected,
  env.recipients.map((r) => r.encrypted_key).join(","), env.iv, env.ciphertext, env.tag].join("."));

// me = {wrapKid, wrapPrivate (CryptoKey), modulusBytes}; pinned = {kid, key (CryptoKey)}
async function openL4(bytes, me, pinned, ctx = {}) {
  const p = parseL4(bytes, ctx.maxBytes);
  const { env, h } = p;
  if (ctx.conversation != null && h.cid !== ctx.conversation) fail("conversation_mismatch", "cid");
  if (ctx.sender != null && h.snd !== ctx.sender) fail("sender_mismatch", "snd");
  const index = h.rkids.indexOf(me.wrapKid);
  if (index < 0) fail("not_a_recipient", "recipients");
  if (pinned.kid !== h.skid) fail("unknown_sender_key", "skid");
  if (!(await subtle.verify({ name: "Ed25519" }, pinned.key, p.sig, signingInput(env)))) {
    fail("signature_invalid", "sig");
  }
  const wrapped = p.wrapped[index];
  if (wrapped.length !== me.modulusBytes) fail("unwrap_failed", "encrypted_key");
  let cek;
  try {
    cek = new Uint8Array(await subtle.decrypt({ name: "RSA-OAEP" }, me.wrapPrivate, wrapped));
  } catch { fail("unwrap_failed", "encrypted_key"); }
  if (cek.length !== 32) fail("unwrap_failed", "encrypted_key");
  if (!sameBytes(await keyCommitment(cek), b64uDecode(h.kc, "kc"))) fail("key_commitment_invalid", "kc");
  const aes = await subtle.importKey("raw", cek, "AES-GCM", false, ["decrypt"]);
  let plaintext;
  try {
    plaintext = new Uint8Array(await subtle.decrypt(
      { name: "AES-GCM", iv: p.iv, additionalData: enc.encode(env.protected), tagLength: 128 },
      aes, concat(p.ciphertext, p.tag)));
  } catch { fail("decryption_failed", "ciphertext"); }
  const content = decodeContent(plaintext);  // §13: padding stripped, strict
  if (expiryHint(content.exp) !== h.xp) fail("content_invalid", "exp");
  return { plaintext, header: h, content };
}

// doc: a content document ({t, ts, ctr, [exp], ...}); the plaintext is its padded canonical JSON.
async function sealL4(doc, sender, conversation, recipients, epoch, head, scheme = "padme") {
  const cek = crypto.getRandomValues(new Uint8Array(32));
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const plaintext = encodeContent(doc, scheme);
  const header = {
    alg: "RSA-OAEP-256", enc: "A256GCM", typ: "e2ee-chat/msg", cty: CTY, v: 3,
    mid: b64uEncode(crypto.getRandomValues(new Uint8Array(16))), cid: conversation, snd: sender.username,
    skid: sender.signKid, xp: expiryHint(doc.exp ?? 0), ep: epoch, mh: head, kc: b64uEncode(await keyCommitment(cek)),
    rkids: recipients.map((r) => r.wrapKid),
  };
  const protectedB64 = b64uEncode(enc.encode(JSON.stringify(header)));
  const aes = await subtle.importKey("raw", cek, "AES-GCM", false, ["encrypt"]);
  const sealed = new Uint8Array(await subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: enc.encode(protectedB64), tagLength: 128 }, aes, plaintext));
  const env = {
    protected: protectedB64,
    recipients: [],
    iv: b64uEncode(iv),
    ciphertext: b64uEncode(sealed.slice(0, -16)),
    tag: b64uEncode(sealed.slice(-16)),
    sig: "",
  };
  for (const r of recipients) {
    const wrapped = new Uint8Array(await subtle.encrypt({ name: "RSA-OAEP" }, r.wrapPublic, cek));
    env.recipients.push({ header: { kid: r.wrapKid }, encrypted_key: b64uEncode(wrapped) });
  }
  env.sig = b64uEncode(new Uint8Array(await subtle.sign({ name: "Ed25519" }, sender.signPrivate, signingInput(env))));
  return JSON.stringify(env);
}

// -- L3 (docs/PROTOCOL.md §6) --------------------------------------------------------------------
const L3HEADER = {
  alg: "str", enc: "str", typ: "str", v: "int", kid: "str", dir: "str", seq: "int", mid: "str",
  cid: "str", snd: "str", ts: "int",
};
const HSHEADER = { alg: "str", enc: "str", typ: "str", v: "int", kid: "str" };

function splitCompact(token, maxBytes) {
  if (!/^[\x00-\x7f]*$/.test(token)) fail("envelope_malformed", "envelope");
  if (token.length > maxBytes) fail("envelope_too_large", "envelope");
  const parts = token.split(".");
  if (parts.length > 5) fail("trailing_data", "envelope");
  if (parts.length < 5) fail("envelope_malformed", "envelope");
  return parts;
}

function ivCtTag(parts) {
  const iv = b64uDecode(parts[2], "iv");
  if (iv.length !== 12) fail("nonce_invalid", "iv");
  const tag = b64uDecode(parts[4], "tag");
  if (tag.length !== 16) fail("tag_invalid", "tag");
  return { iv, ciphertext: b64uDecode(parts[3], "ciphertext"), tag };
}

async function sessionId(key) {
  const digest = await sha256(concat(enc.encode("e2ee-chat/v1/l3-sid\0"), key));
  return b64uEncode(digest.slice(0, 16));
}

async function openL3(session, token, direction, afterSeq = null, maxBytes = 256 * 1024) {
  const parts = splitCompact(token, maxBytes);
  const headerBytes = b64uDecode(parts[0], "protected");
  const h = parseStrict(headerBytes, "protected", "envelope_malformed");
  checkShape(h, L3HEADER, "protected", "envelope_malformed");
  if (h.alg !== "dir" || h.enc !== "A256GCM") fail("unsupported_algorithm", "alg");
  if (h.typ !== "e2ee-chat/l3" || h.v !== 1) fail("unsupported_algorithm", "typ");
  if (parts[1] !== "") fail("envelope_malformed", "encrypted_key");
  if (h.kid !== session.id) fail("session_mismatch", "kid");
  if (h.dir !== "c2r" && h.dir !== "r2c") fail("envelope_malformed", "dir");
  if (b64uDecode(h.mid, "mid").length !== 16) fail("envelope_malformed", "mid");
  if (!ID_RE.test(h.cid)) fail("envelope_malformed", "cid");
  if (!ID_RE.test(h.snd)) fail("envelope_malformed", "snd");
  if (!(h.seq >= 1 && h.seq <= MAX_SAFE)) fail("envelope_malformed", "seq");
  if (!(h.ts >= 0 && h.ts <= MAX_SAFE)) fail("envelope_malformed", "ts");
  const { iv, ciphertext, tag } = ivCtTag(parts);
  let pt;
  try {
    pt = new Uint8Array(await subtle.decrypt({ name: "AES-GCM", iv, additionalData: enc.encode(parts[0]), tagLength: 128 },
      session.key, concat(ciphertext, tag)));
  } catch { fail("decryption_failed", "ciphertext"); }
  if (h.dir !== direction) fail("direction_mismatch", "dir");
  if (afterSeq !== null && h.seq <= afterSeq) fail("replayed", "seq");
  return { plaintext: pt, header: h };
}

async function acceptHandshake(token, relay, challenge) {
  const parts = splitCompact(token, 4096);
  const h = parseStrict(b64uDecode(parts[0], "protected"), "protected", "envelope_malformed");
  checkShape(h, HSHEADER, "protected", "envelope_malformed");
  if (h.alg !== "RSA-OAEP-256" || h.enc !== "A256GCM") fail("unsupported_algorithm", "alg");
  if (h.typ !== "e2ee-chat/l3-hs" || h.v !== 1) fail("unsupported_algorithm", "typ");
  if (h.kid !== relay.kid) fail("relay_key_mismatch", "kid");
  const wrapped = b64uDecode(parts[1], "encrypted_key");
  const { iv, ciphertext, tag } = ivCtTag(parts);
  if (wrapped.length !== relay.modulusBytes) fail("unwrap_failed", "encrypted_key");
  let key;
  try {
    key = new Uint8Array(await subtle.decrypt({ name: "RSA-OAEP" }, relay.private, wrapped));
  } catch { fail("unwrap_failed", "encrypted_key"); }
  if (key.length !== 32) fail("unwrap_failed", "encrypted_key");
  const aes = await subtle.importKey("raw", key, "AES-GCM", false, ["decrypt", "encrypt"]);
  let proof;
  try {
    proof = new Uint8Array(await subtle.decrypt({ name: "AES-GCM", iv, additionalData: enc.encode(parts[0]), tagLength: 128 },
      aes, concat(ciphertext, tag)));
  } catch { fail("decryption_failed", "ciphertext"); }
  if (!equal(proof, challenge)) fail("challenge_mismatch", "challenge");
  return { key: aes, raw: key, id: await sessionId(key) };
}

async function startHandshake(relayPublic, relayKid, challenge) {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const protectedB64 = b64uEncode(enc.encode(JSON.stringify(
    { alg: "RSA-OAEP-256", enc: "A256GCM", typ: "e2ee-chat/l3-hs", v: 1, kid: relayKid })));
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const aes = await subtle.importKey("raw", key, "AES-GCM", false, ["encrypt", "decrypt"]);
  const sealed = new Uint8Array(await subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: enc.encode(protectedB64), tagLength: 128 }, aes, challenge));
  const wrapped = new Uint8Array(await subtle.encrypt({ name: "RSA-OAEP" }, relayPublic, key));
  const token = [protectedB64, b64uEncode(wrapped), b64uEncode(iv), b64uEncode(sealed.slice(0, -16)),
    b64uEncode(sealed.slice(-16))].join(".");
  return { session: { key: aes, id: await sessionId(key) }, token };
}

async function sealL3(session, plaintext, { direction, cid, snd, seq }) {
  const header = {
    alg: "dir", enc: "A256GCM", typ: "e2ee-chat/l3", v: 1, kid: session.id, dir: direction, seq,
    mid: b64uEncode(crypto.getRandomValues(new Uint8Array(16))), cid, snd, ts: Date.now(),
  };
  const protectedB64 = b64uEncode(enc.encode(JSON.stringify(header)));
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(await subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: enc.encode(protectedB64), tagLength: 128 }, session.key, plaintext));
  return [protectedB64, "", b64uEncode(iv), b64uEncode(sealed.slice(0, -16)), b64uEncode(sealed.slice(-16))].join(".");
}

// -- safety numbers (docs/PROTOCOL.md §4.3) ------------------------------------------------------
async function safetyNumber(a, b) {
  const half = async (u) => {
    const data = concat(enc.encode("e2ee-chat/v1/safety\0"), enc.encode(u.username), new Uint8Array([0]),
      b64uDecode(u.wrap_kid), b64uDecode(u.sign_kid));
    const h = new Uint8Array(await subtle.digest("SHA-512", data));
    let digits = "";
    for (let i = 0; i < 30; i += 5) {
      let n = 0;
      for (let k = 0; k < 5; k++) n = n * 256 + h[i + k];
      digits += String(n % 100000).padStart(5, "0");
    }
    return digits;
  };
  const cmp = (x, y) => {
    const bx = enc.encode(x.username), by = enc.encode(y.username);
    for (let i = 0; i < Math.min(bx.length, by.length); i++) if (bx[i] !== by[i]) return bx[i] - by[i];
    return bx.length - by.length;
  };
  const [first, second] = [a, b].sort(cmp);
  const digits = (await half(first)) + (await half(second));
  return digits.match(/.{5}/g).join(" ");
}

// -- the run -------------------------------------------------------------------------------------
const [dir, challengeText] = process.argv.slice(2);
const load = (name) => JSON.parse(readFileSync(join(dir, name), "utf-8"));
const KEYS = load("keys.json"), L4 = load("l4.json"), NEG = load("l4_negative.json"), L3 = load("l3.json");
const SAFETY = load("safety.json");
const MEMBERSHIP = load("membership.json"), POOL = load("key_pool.json");
const checks = [];
const check = (name, ok, detail = "") => checks.push({ name, ok: Boolean(ok), detail: String(detail) });

async function importUser(e) {
  const wrapSpki = b64uDecode(e.wrap_public_spki_der);
  const signSpki = e.sign_public_spki_der ? b64uDecode(e.sign_public_spki_der) : null;
  const wrapPrivate = await subtle.importKey("pkcs8", b64uDecode(e.wrap_private_pkcs8_der),
    { name: "RSA-OAEP", hash: "SHA-256" }, false, ["decrypt"]);
  return {
    username: e.username,
    wrapKid: await keyId(wrapSpki),
    signKid: signSpki ? await keyId(signSpki) : null,
    wrapPrivate,
    modulusBytes: wrapPrivate.algorithm.modulusLength / 8,
    wrapPublic: await subtle.importKey("spki", wrapSpki, { name: "RSA-OAEP", hash: "SHA-256" }, false, ["encrypt"]),
    signPublic: e.sign_public_raw
      ? await subtle.importKey("raw", b64uDecode(e.sign_public_raw), { name: "Ed25519" }, false, ["verify"]) : null,
    signPrivate: e.sign_private_pkcs8_der
      ? await subtle.importKey("pkcs8", b64uDecode(e.sign_private_pkcs8_der), { name: "Ed25519" }, false, ["sign"]) : null,
  };
}

const users = {};
for (const [name, e] of Object.entries(KEYS.users)) {
  users[name] = await importUser(e);
  check(`key ids of ${name} are SHA-256 over SPKI DER`,
    users[name].wrapKid === e.wrap_kid && users[name].signKid === e.sign_kid, `${users[name].wrapKid} vs ${e.wrap_kid}`);
  const spkiBack = new Uint8Array(await subtle.exportKey("spki",
    await subtle.importKey("raw", b64uDecode(e.sign_public_raw), { name: "Ed25519" }, true, ["verify"])));
  check(`Ed25519 raw key of ${name} matches its SPKI`, equal(spkiBack, b64uDecode(e.sign_public_spki_der)));
}
const relay = await importUser({ ...KEYS.relay });
relay.kid = relay.wrapKid;
relay.private = relay.wrapPrivate;
check("relay key id", relay.kid === KEYS.relay.wrap_kid);

for (const v of SAFETY.vectors) {
  const got = await safetyNumber(KEYS.users[v.a], KEYS.users[v.b]);
  check(`safety number ${v.a}-${v.b}`, got === v.safety_number, got);
}

const pinnedOf = (name) => ({ kid: users[name].signKid, key: users[name].signPublic });
for (const v of L4.vectors) {
  for (const r of v.recipients) {
    try {
      const opened = await openL4(enc.encode(v.envelope), users[r], pinnedOf(v.sender),
        { conversation: v.conversation, sender: v.sender });
      check(`L4 ${v.name} opened by ${r}`, equal(opened.plaintext, b64uDecode(v.plaintext)) &&
        canonicalContent(opened.content) === v.content_json && opened.content.ctr === v.content.ctr &&
        opened.header.xp === v.xp && opened.plaintext.length === bucket(enc.encode(v.content_json).length, v.scheme),
        JSON.stringify(opened.content));
    } catch (err) {
      check(`L4 ${v.name} opened by ${r}`, false, `${err.code} ${err.field} ${err.message}`);
    }
  }
  // Deterministic parts from the inputs alone.
  const aes = await subtle.importKey("raw", b64uDecode(v.cek), "AES-GCM", false, ["encrypt"]);
  const sealed = new Uint8Array(await subtle.encrypt({ name: "AES-GCM", iv: b64uDecode(v.iv),
    additionalData: enc.encode(v.protected), tagLength: 128 }, aes, b64uDecode(v.plaintext)));
  check(`L4 ${v.name} ciphertext and tag from cek, iv, protected`,
    b64uEncode(sealed.slice(0, -16)) === v.ciphertext && b64uEncode(sealed.slice(-16)) === v.tag);
  const env = JSON.parse(v.envelope);
  const sig = new Uint8Array(await subtle.sign({ name: "Ed25519" }, users[v.sender].signPrivate, signingInput(env)));
  check(`L4 ${v.name} signature is deterministic Ed25519 over the signing input`, b64uEncode(sig) === env.sig);
  check(`L4 ${v.name} protected header text`,
    new TextDecoder().decode(b64uDecode(v.protected)) === v.protected_header_json);
}

for (const v of NEG.vectors) {
  const c = v.context;
  let got = { code: "opened", field: null };
  try {
    await openL4(enc.encode(v.envelope), users[c.me], pinnedOf(c.pinned),
      { conversation: c.conversation, sender: c.sender, maxBytes: c.max_bytes });
  } catch (err) {
    got = err instanceof ProtoError ? err : { code: `exception ${err}`, field: null };
  }
  check(`L4 negative ${v.name} -> ${v.code}`, got.code === v.code && got.field === v.field, `${got.code} ${got.field}`);
}

const l3key = b64uDecode(L3.session_key);
const session = {
  key: await subtle.importKey("raw", l3key, "AES-GCM", false, ["encrypt", "decrypt"]),
  id: await sessionId(l3key),
};
check("L3 session id", session.id === L3.session_id, session.id);
try {
  const accepted = await acceptHandshake(L3.handshake.token, relay, b64uDecode(L3.challenge));
  check("L3 handshake vector accepted", equal(accepted.raw, l3key) && accepted.id === L3.session_id);
} catch (err) {
  check("L3 handshake vector accepted", false, `${err.code} ${err.message}`);
}
for (const m of L3.messages) {
  try {
    const opened = await openL3(session, m.token, m.direction);
    check(`L3 ${m.name} opened`, equal(opened.plaintext, b64uDecode(m.plaintext)) && opened.header.seq === m.seq &&
      opened.header.mid === m.mid);
  } catch (err) {
    check(`L3 ${m.name} opened`, false, `${err.code} ${err.message}`);
  }
}
for (const v of L3.negative) {
  let got = { code: "opened", field: null };
  try { await openL3(session, v.token, v.direction, v.after_seq); } catch (err) { got = err; }
  check(`L3 negative ${v.name} -> ${v.code}`, got.code === v.code && got.field === v.field, `${got.code} ${got.field}`);
}
for (const v of L3.handshake_negative) {
  let got = { code: "accepted", field: null };
  try { await acceptHandshake(v.token, relay, b64uDecode(v.challenge)); } catch (err) { got = err; }
  check(`L3 handshake negative ${v.name} -> ${v.code}`, got.code === v.code && got.field === v.field,
    `${got.code} ${got.field}`);
}

// -- membership (docs/PROTOCOL.md §12) ------------------------------------------------------------
const signKeys = new Map(Object.values(users).map((u) => [`${u.username} ${u.signKid}`, { kid: u.signKid, key: u.signPublic }]));
for (const e of MEMBERSHIP.extra_keys) {
  const k = await ed25519FromSeed(b64uDecode(POOL.identities[e.pool_index].sign_private_seed));
  check(`extra key ${e.pool_index} id`, k.kid === e.sign_kid);
  signKeys.set(`${e.username} ${k.kid}`, k);
}
const resolve = async (user, kid) => {
  const k = signKeys.get(`${user} ${kid}`);
  if (!k) throw new Error(`no key ${user} ${kid}`);
  return k;
};
async function verifiedChain(log, cid) {
  const statements = [];
  for (const s of log) statements.push(await parseStatement(s));
  const chain = new Chain(statements[0]?.cid ?? cid);
  await chain.extend(statements, resolve);
  return chain;
}
const outcome = async (fn) => {
  try { await fn(); return { code: null, field: null }; } catch (err) {
    return err instanceof ProtoError ? err : { code: `exception ${err}`, field: null };
  }
};
for (const c of MEMBERSHIP.chains) {
  const chain = new Chain(c.cid);
  let ok = true, detail = "";
  for (const want of c.statements) {
    const got = await outcome(async () => {
      const st = await parseStatement(want.signed);
      await chain.extend([st], resolve);
      if (st.hash !== want.hash || new TextDecoder().decode(b64uDecode(st.bodyB64)) !== want.body_json) {
        throw new Error("hash or body differs");
      }
    });
    if (got.code !== null) { ok = false; detail = `epoch ${want.ep}: ${got.code} ${got.field} ${got.message}`; }
  }
  check(`membership chain ${c.name} verifies`, ok && chain.head.ep === c.statements.length - 1, detail);
}
for (const v of MEMBERSHIP.negative) {
  const chain = await verifiedChain(v.log, "conv-m1");
  const got = await outcome(async () => chain.extend([await parseStatement(v.statement)], resolve));
  check(`membership negative ${v.name} -> ${v.code}`, got.code === v.code && got.field === v.field &&
    chain.statements.length === v.log.length, `${got.code} ${got.field}`);
}
for (const v of MEMBERSHIP.forks) {
  const got = await outcome(async () => {
    const chain = await verifiedChain(v.log, "conv-m1");
    if (v.a) {
      const a = await parseStatement(v.a), b = await parseStatement(v.b);
      await (await verifiedChain(v.log)).extend([b], resolve);  // b alone follows the log
      await chain.extend([a], resolve);
      await chain.extend([b], resolve);
      detectFork(a, b);
    } else {
      checkContinuity(chain, v.verified.ep, v.verified.hash);
    }
  });
  check(`membership fork ${v.name} -> ${v.code}`, got.code === v.code && got.field === v.field, `${got.code} ${got.field}`);
}
const everyOp = await verifiedChain(MEMBERSHIP.chains[0].statements.map((s) => s.signed));
for (const v of MEMBERSHIP.audience) {
  let opened = null;
  const got = await outcome(async () => {
    checkAudience(everyOp, parseL4(enc.encode(v.envelope)).h);
    opened = await openL4(enc.encode(v.envelope), users.alice, pinnedOf(v.sender), { conversation: v.conversation });
  });
  const text = opened ? opened.content.body : null;
  check(`membership audience ${v.name} -> ${v.code}`, got.code === v.code && got.field === v.field &&
    (v.code !== null || text === v.body), `${got.code} ${got.field}`);
}

// Produce a log and messages for the Python side.
const asMember = (u) => ({ username: u.username, signKid: u.signKid, signPrivate: u.signPrivate });
const entry = (u) => ({ u: u.username, wk: u.wrapKid, sk: u.signKid });
const created = await signStatement(asMember(users.alice), {
  cid: "conv-node", ep: 0, op: "create", members: [entry(users.alice), entry(users.bob)], admins: null,
  title: "made by WebCrypto ✓", prev: null, ts: Date.now() });
const added = await signStatement(asMember(users.bob), {
  cid: "conv-node", ep: 1, op: "add", members: [entry(users.alice), entry(users.bob), entry(users.carol)],
  admins: null, title: created.title, prev: created.hash, ts: Date.now() });
const nodeChain = new Chain("conv-node");
await nodeChain.extend([created, added], resolve);
check("own membership log verifies here too", nodeChain.head === added);
const text = "sealed by WebCrypto ✓ — grüße 👋";
const sentAt = Date.now();
const l4 = await sealL4({ t: "reply", body: text, ref: "AAECAwQFBgcICQoLDA0ODw", ts: sentAt, ctr: 5, exp: sentAt + 86400000 },
  users.alice, "conv-node", [users.alice, users.bob, users.carol], added.ep, added.hash);
const reaction = await sealL4({ t: "react", ref: "AAECAwQFBgcICQoLDA0ODw", emoji: "🎉", on: true, ts: sentAt, ctr: 6 },
  users.alice, "conv-node", [users.alice, users.bob, users.carol], added.ep, added.hash, "pow2");
checkAudience(nodeChain, parseL4(enc.encode(l4)).h);
const ownOpen = await openL4(enc.encode(l4), users.carol, pinnedOf("alice"), { conversation: "conv-node", sender: "alice" });
check("own L4 envelope opens here too", ownOpen.content.body === text && ownOpen.plaintext.length === 256);
const challenge = b64uDecode(challengeText);
const hs = await startHandshake(relay.wrapPublic, relay.kid, challenge);
const l3token = await sealL3(hs.session, enc.encode(text), { direction: "c2r", cid: "conv-node", snd: "alice", seq: 1 });

process.stdout.write(JSON.stringify({
  node: process.version,
  checks,
  produced: {
    l4: { envelope: l4, plaintext: text, sent_at: sentAt, conversation: "conv-node", sender: "alice",
      recipients: ["alice", "bob", "carol"], reaction },
    membership: [created.signed, added.signed],
    l3: { handshake: hs.token, token: l3token, plaintext: text, session_id: hs.session.id },
  },
}) + "\n");
