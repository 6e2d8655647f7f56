// The project's L3 and L4 message formats (docs/PROTOCOL.md §5, §6) in WebCrypto only, for the
// bench: the same work per message as shared/l3.py and shared/envelope.py (JSON, base64url, the
// protected header as AES-GCM AAD, RSA-OAEP-256 per recipient, Ed25519 over the signing input).
// An ES module with no imports: it runs unchanged in a browser and in Node (globalThis.crypto).
// The tests' independent implementation (tests/interop/webcrypto_interop.mjs) is the conformance
// check; this one is timed, and bench/browser.py has Python open what it seals.

const subtle = globalThis.crypto.subtle;
const enc = new TextEncoder();
const dec = new TextDecoder();

export const random = (n) => globalThis.crypto.getRandomValues(new Uint8Array(n));

// base64url without padding (RFC 4648 §5), through the platform's base64 (btoa/atob).
export function b64u(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function unb64u(text) {
  const s = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

export function textOf(size) {
  const base = "The quick brown fox jumps over the lazy dog; 0123456789. ";
  return base.repeat(Math.floor(size / base.length) + 1).slice(0, size);
}

const OAEP = { name: "RSA-OAEP", hash: "SHA-256" };

// An identity: RSA-OAEP-256 wrap key pair of `bits` and an Ed25519 signing key pair; key ids are
// SHA-256 over the SPKI DER, base64url (43 characters), as in shared/keys.py.
export async function identity(username, bits) {
  const wrap = await subtle.generateKey({ ...OAEP, modulusLength: bits, publicExponent: new Uint8Array([1, 0, 1]) },
    true, ["encrypt", "decrypt"]);
  const sign = await subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"]);
  const kid = async (k) => b64u(new Uint8Array(await subtle.digest("SHA-256", await subtle.exportKey("spki", k))));
  return { username, wrapPublic: wrap.publicKey, wrapPrivate: wrap.privateKey, wrapKid: await kid(wrap.publicKey),
    signPublic: sign.publicKey, signPrivate: sign.privateKey, signKid: await kid(sign.publicKey) };
}

// A recipient from SPKI DER bytes (an RSA-OAEP-256 public key) and its key id.
export async function recipientFromSpki(spki, wrapKid) {
  return { wrapKid, wrapPublic: await subtle.importKey("spki", spki, OAEP, false, ["encrypt"]) };
}

// -- L4 (PROTOCOL.md §5) ---------------------------------------------------------------------------
// Version 3: `membership` = {ep, mh} names the membership epoch and its statement hash, the header
// commits to the CEK (kc = HMAC-SHA-256(CEK, KC_CONTEXT)), and the plaintext is a content document
// (PROTOCOL.md §13: {"body","ctr","t":"text","ts"} in canonical order, padded with spaces to its
// Padmé bucket), so the sender's time and counter travel inside the ciphertext.
const V = 3;
const KC_CONTEXT = enc.encode("e2ee-chat/v3/key-commitment");
const signingInput = (env) => enc.encode([`e2ee-chat/v${V}/sig`, env.protected,
  env.recipients.map((r) => r.encrypted_key).join(","), env.iv, env.ciphertext, env.tag].join("."));
const hmacKey = (cek, use) => subtle.importKey("raw", cek, { name: "HMAC", hash: "SHA-256" }, false, [use]);

// Padmé (Nikitin et al., PETS 2019), at least 256 bytes: shared/content.py's default bucket.
export function padme(length) {
  if (length <= 256) return 256;
  const e = 31 - Math.clz32(length), s = 32 - Math.clz32(e), mask = (1 << (e - s)) - 1;
  return (length + mask) & ~mask;
}

function textDocument(text, counter) {
  const json = enc.encode(`{"body":${JSON.stringify(text)},"ctr":${counter},"t":"text","ts":${Date.now()}}`);
  const out = new Uint8Array(padme(json.length)).fill(0x20);
  out.set(json);
  return out;
}

export async function sealL4(text, sender, conversation, recipients, counter, membership) {
  const fresh = random(60); // CEK, nonce, message id in one draw, as shared/envelope.py does
  const cek = fresh.subarray(0, 32), iv = fresh.subarray(32, 44);
  const header = { alg: "RSA-OAEP-256", enc: "A256GCM", typ: "e2ee-chat/msg", cty: "application/e2ee-chat+json", v: V,
    mid: b64u(fresh.subarray(44, 60)), cid: conversation, snd: sender.username, skid: sender.signKid, xp: 0,
    ep: membership.ep, mh: membership.mh,
    kc: b64u(new Uint8Array(await subtle.sign("HMAC", await hmacKey(cek, "sign"), KC_CONTEXT))),
    rkids: recipients.map((r) => r.wrapKid) };
  const protectedB64 = b64u(enc.encode(JSON.stringify(header)));
  const aes = await subtle.importKey("raw", cek, "AES-GCM", false, ["encrypt"]);
  const sealed = new Uint8Array(await subtle.encrypt({ name: "AES-GCM", iv, additionalData: enc.encode(protectedB64) },
    aes, textDocument(text, counter)));
  // One wrap after another, as the Python and Node rows do (Promise.all would spread them over the
  // browser's crypto threads: faster on an idle machine, but no longer the per-recipient cost).
  const wrapped = [];
  for (const r of recipients) wrapped.push(await subtle.encrypt({ name: "RSA-OAEP" }, r.wrapPublic, cek));
  const env = { protected: protectedB64,
    recipients: recipients.map((r, i) => ({ header: { kid: r.wrapKid }, encrypted_key: b64u(new Uint8Array(wrapped[i])) })),
    iv: b64u(iv), ciphertext: b64u(sealed.subarray(0, sealed.length - 16)), tag: b64u(sealed.subarray(sealed.length - 16)),
    sig: "" };
  env.sig = b64u(new Uint8Array(await subtle.sign({ name: "Ed25519" }, sender.signPrivate, signingInput(env))));
  return JSON.stringify(env);
}

export async function openL4(data, me, signPublic) {
  const env = JSON.parse(data);
  const header = JSON.parse(dec.decode(unb64u(env.protected)));
  const index = header.rkids.indexOf(me.wrapKid);
  if (index < 0 || env.recipients[index].header.kid !== me.wrapKid) throw new Error("not_a_recipient");
  if (header.v !== V) throw new Error("unsupported_algorithm");
  if (!(await subtle.verify({ name: "Ed25519" }, signPublic, unb64u(env.sig), signingInput(env)))) {
    throw new Error("signature_invalid");
  }
  const cek = await subtle.decrypt({ name: "RSA-OAEP" }, me.wrapPrivate, unb64u(env.recipients[index].encrypted_key));
  if (!(await subtle.verify("HMAC", await hmacKey(cek, "verify"), unb64u(header.kc), KC_CONTEXT))) {
    throw new Error("key_commitment_invalid");
  }
  const aes = await subtle.importKey("raw", cek, "AES-GCM", false, ["decrypt"]);
  const ct = unb64u(env.ciphertext), tag = unb64u(env.tag);
  const both = new Uint8Array(ct.length + 16);
  both.set(ct);
  both.set(tag, ct.length);
  const pt = await subtle.decrypt({ name: "AES-GCM", iv: unb64u(env.iv), additionalData: enc.encode(env.protected) },
    aes, both);
  const doc = JSON.parse(dec.decode(pt)); // trailing padding spaces are JSON whitespace
  return { text: doc.body, ts: doc.ts, ctr: doc.ctr, header };
}

// -- L3 (PROTOCOL.md §6): one hop under a session key ------------------------------------------
export async function l3Session() {
  const raw = random(32);
  const key = await subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  const digest = new Uint8Array(await subtle.digest("SHA-256", new Uint8Array([...enc.encode("e2ee-chat/v1/l3-sid\0"), ...raw])));
  return { key, id: b64u(digest.subarray(0, 16)) };
}

export async function sealL3(session, text, { dir, cid, snd, seq }) {
  const fresh = random(28);
  const protectedB64 = b64u(enc.encode(JSON.stringify({ alg: "dir", enc: "A256GCM", typ: "e2ee-chat/l3", v: 1,
    kid: session.id, dir, seq, mid: b64u(fresh.subarray(12)), cid, snd, ts: Date.now() })));
  const iv = fresh.subarray(0, 12);
  const sealed = new Uint8Array(await subtle.encrypt({ name: "AES-GCM", iv, additionalData: enc.encode(protectedB64) },
    session.key, enc.encode(text)));
  return [protectedB64, "", b64u(iv), b64u(sealed.subarray(0, sealed.length - 16)), b64u(sealed.subarray(sealed.length - 16))]
    .join(".");
}

export async function openL3(session, token, dir) {
  const parts = token.split(".");
  if (parts.length !== 5 || parts[1] !== "") throw new Error("envelope_malformed");
  const header = JSON.parse(dec.decode(unb64u(parts[0])));
  if (header.alg !== "dir" || header.kid !== session.id || header.dir !== dir) throw new Error("session_mismatch");
  const ct = unb64u(parts[3]), tag = unb64u(parts[4]);
  const both = new Uint8Array(ct.length + 16);
  both.set(ct);
  both.set(tag, ct.length);
  const pt = await subtle.decrypt({ name: "AES-GCM", iv: unb64u(parts[2]), additionalData: enc.encode(parts[0]) },
    session.key, both);
  return { text: dec.decode(pt), header };
}
