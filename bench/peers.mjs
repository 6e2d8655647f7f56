// The seed article's rows run by Node.js on this machine: node:crypto (OpenSSL) and WebCrypto
// (crypto.subtle), no npm packages. Each row does the same work as the Python row of the same
// name in bench/primitives.py (same payloads, same algorithms, same JOSE encodings).
//
// usage: node bench/peers.mjs [iterations] [keygen_iterations] [bits]
// prints one JSON object: {"node", "openssl", "params", "per_request", "one_time", "enc_dec_1kb", "l4"}
// every time in ms: {"n", "median_ms", "p95_ms", "p99_ms"}.

import crypto from "node:crypto";

const N = Number(process.argv[2] || 1000);
const KEYGEN_N = Number(process.argv[3] || 4);
const BITS = Number(process.argv[4] || 3072);
const SIZES = (process.argv[5] || "2048,3072,4096").split(",").map(Number);
const subtle = crypto.webcrypto.subtle;

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const n = s.length;
  const pct = (p) => s[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))];
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return { n, median_ms: median, p95_ms: pct(95), p99_ms: pct(99) };
}

function measure(fn, n = N, warmup = 10) {
  for (let i = 0; i < warmup; i++) fn();
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    fn();
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return stats(out);
}

async function measureAsync(fn, n = N, warmup = 10) {
  for (let i = 0; i < warmup; i++) await fn();
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await fn();
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return stats(out);
}

const b64u = (buf) => Buffer.from(buf).toString("base64url");
const unb64u = (s) => Buffer.from(s, "base64url");

function textOf(size) {
  const base = "The quick brown fox jumps over the lazy dog; 0123456789. ";
  return base.repeat(Math.floor(size / base.length) + 1).slice(0, size);
}

// -- L1: the plain envelope, one serialization + one parse with the same checks ------------------
const MID_RE = /^[A-Za-z0-9_-]{22}$/;
const ID_RE = /^[A-Za-z0-9._-]{1,64}$/;
function plainMake(text) {
  return { mid: b64u(crypto.randomBytes(16)), cid: "c1", snd: "alice", ts: Date.now(), text };
}
function plainParse(s) {
  const m = JSON.parse(s);
  if (typeof m.text !== "string" || !MID_RE.test(m.mid) || !ID_RE.test(m.cid) || !ID_RE.test(m.snd)) throw new Error("bad");
  if (!Number.isSafeInteger(m.ts) || m.ts < 0) throw new Error("bad ts");
  return m;
}

// -- L2: HS256 JWT, issued and verified like server/auth.py (fixed alg, exp/iat/sub/iss/aud/jti) --
const secret = crypto.randomBytes(32);
function jwtSign(sub) {
  const now = Math.floor(Date.now() / 1000);
  const h = b64u(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const p = b64u(JSON.stringify({ sub, iss: "e2ee-chat-relay", aud: "e2ee-chat", iat: now, nbf: now, exp: now + 900,
    jti: b64u(crypto.randomBytes(9)) }));
  const sig = crypto.createHmac("sha256", secret).update(`${h}.${p}`).digest();
  return `${h}.${p}.${b64u(sig)}`;
}
function jwtVerify(token) {
  const [h, p, s] = token.split(".");
  const header = JSON.parse(unb64u(h));
  if (header.alg !== "HS256") throw new Error("alg");
  const expect = crypto.createHmac("sha256", secret).update(`${h}.${p}`).digest();
  const got = unb64u(s);
  if (got.length !== expect.length || !crypto.timingSafeEqual(got, expect)) throw new Error("sig");
  const c = JSON.parse(unb64u(p));
  const now = Date.now() / 1000;
  for (const k of ["exp", "iat", "sub", "iss", "aud", "jti"]) if (!(k in c)) throw new Error(k);
  if (c.exp + 2 < now || c.nbf - 2 > now || c.iss !== "e2ee-chat-relay" || c.aud !== "e2ee-chat") throw new Error("claims");
  return c;
}

// -- L3: JWE compact, dir + A256GCM, header as AAD (shared/l3.py) --------------------------------
function l3Header(seq) {
  return b64u(JSON.stringify({ alg: "dir", enc: "A256GCM", typ: "e2ee-chat/l3", v: 1, kid: "k".repeat(22), dir: "c2r",
    seq, mid: b64u(crypto.randomBytes(16)), cid: "c1", snd: "alice", ts: Date.now() }));
}
function l3Seal(key, text, seq) {
  const protectedB64 = l3Header(seq);
  const iv = crypto.randomBytes(12);
  const c = crypto.createCipheriv("aes-256-gcm", key, iv);
  c.setAAD(Buffer.from(protectedB64, "ascii"));
  const ct = Buffer.concat([c.update(text, "utf8"), c.final()]);
  return `${protectedB64}..${b64u(iv)}.${b64u(ct)}.${b64u(c.getAuthTag())}`;
}
function l3Open(key, token) {
  const parts = token.split(".");
  if (parts.length !== 5 || parts[1] !== "") throw new Error("shape");
  const h = JSON.parse(unb64u(parts[0]));
  if (h.alg !== "dir" || h.enc !== "A256GCM") throw new Error("alg");
  const d = crypto.createDecipheriv("aes-256-gcm", key, unb64u(parts[2]));
  d.setAAD(Buffer.from(parts[0], "ascii"));
  d.setAuthTag(unb64u(parts[4]));
  return Buffer.concat([d.update(unb64u(parts[3])), d.final()]).toString("utf8");
}
async function l3SealWeb(key, text, seq) {
  const protectedB64 = l3Header(seq);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(await subtle.encrypt({ name: "AES-GCM", iv, additionalData: Buffer.from(protectedB64, "ascii") },
    key, new TextEncoder().encode(text)));
  return `${protectedB64}..${b64u(iv)}.${b64u(sealed.subarray(0, sealed.length - 16))}.${b64u(sealed.subarray(sealed.length - 16))}`;
}
async function l3OpenWeb(key, token) {
  const parts = token.split(".");
  if (parts.length !== 5 || parts[1] !== "") throw new Error("shape");
  const h = JSON.parse(unb64u(parts[0]));
  if (h.alg !== "dir") throw new Error("alg");
  const data = Buffer.concat([unb64u(parts[3]), unb64u(parts[4])]);
  const pt = await subtle.decrypt({ name: "AES-GCM", iv: unb64u(parts[2]), additionalData: Buffer.from(parts[0], "ascii") },
    key, data);
  return new TextDecoder().decode(pt);
}

// -- L4: JWE General JSON, RSA-OAEP-256 per recipient + A256GCM + Ed25519 sig (shared/envelope.py) -
const OAEP = (key) => ({ key, padding: crypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" });
function l4Seal(text, sender, recipients) {
  const cek = crypto.randomBytes(32);
  const iv = crypto.randomBytes(12);
  const protectedB64 = b64u(JSON.stringify({ alg: "RSA-OAEP-256", enc: "A256GCM", typ: "e2ee-chat/msg",
    cty: "text/plain;charset=utf-8", v: 1, mid: b64u(crypto.randomBytes(16)), cid: "c1", snd: "alice",
    skid: sender.skid, ts: Date.now(), ctr: 1, rkids: recipients.map((r) => r.kid) }));
  const c = crypto.createCipheriv("aes-256-gcm", cek, iv);
  c.setAAD(Buffer.from(protectedB64, "ascii"));
  const ct = Buffer.concat([c.update(text, "utf8"), c.final()]);
  const env = { protected: protectedB64,
    recipients: recipients.map((r) => ({ header: { kid: r.kid }, encrypted_key: b64u(crypto.publicEncrypt(OAEP(r.pub), cek)) })),
    iv: b64u(iv), ciphertext: b64u(ct), tag: b64u(c.getAuthTag()), sig: "" };
  env.sig = b64u(crypto.sign(null, Buffer.from(sigInput(env)), sender.signPriv));
  return JSON.stringify(env);
}
function sigInput(env) {
  return ["e2ee-chat/v1/sig", env.protected, env.recipients.map((r) => r.encrypted_key).join(","), env.iv, env.ciphertext,
    env.tag].join(".");
}
function l4Open(data, me, signPub) {
  const env = JSON.parse(data);
  const h = JSON.parse(unb64u(env.protected));
  const i = h.rkids.indexOf(me.kid);
  if (i < 0) throw new Error("not a recipient");
  if (!crypto.verify(null, Buffer.from(sigInput(env)), signPub, unb64u(env.sig))) throw new Error("sig");
  const cek = crypto.privateDecrypt(OAEP(me.priv), unb64u(env.recipients[i].encrypted_key));
  const d = crypto.createDecipheriv("aes-256-gcm", cek, unb64u(env.iv));
  d.setAAD(Buffer.from(env.protected, "ascii"));
  d.setAuthTag(unb64u(env.tag));
  return Buffer.concat([d.update(unb64u(env.ciphertext)), d.final()]).toString("utf8");
}
function identity(bits) {
  const { publicKey, privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: bits, publicExponent: 65537 });
  const ed = crypto.generateKeyPairSync("ed25519");
  const kid = b64u(crypto.createHash("sha256").update(publicKey.export({ type: "spki", format: "der" })).digest());
  const skid = b64u(crypto.createHash("sha256").update(ed.publicKey.export({ type: "spki", format: "der" })).digest());
  return { pub: publicKey, priv: privateKey, kid, skid, signPriv: ed.privateKey, signPub: ed.publicKey };
}

async function main() {
  const out = { node: process.version, openssl: process.versions.openssl,
    params: { n: N, keygen_n: KEYGEN_N, bits: BITS, sizes: SIZES }, per_request: {}, one_time: {}, enc_dec_1kb: {}, l4: {} };
  const token = jwtSign("alice");
  const key = crypto.randomBytes(32);
  const webKey = await subtle.importKey("raw", key, "AES-GCM", false, ["encrypt", "decrypt"]);
  const alice = identity(BITS);
  const bob = identity(BITS);
  const payloads = { "100 B": 100, "1 KB": 1024, "10 KB": 10240 };
  for (const [label, size] of Object.entries(payloads)) {
    const text = textOf(size);
    let seq = 0;
    const l1 = () => plainParse(JSON.stringify(plainMake(text)));
    out.per_request[label] = {
      L1: measure(l1),
      L2: measure(() => { l1(); jwtVerify(token); }),
      L3_node: measure(() => l3Open(key, l3Seal(key, text, ++seq))),
      L3_webcrypto: await measureAsync(async () => l3OpenWeb(webKey, await l3SealWeb(webKey, text, ++seq))),
      L4: measure(() => l4Open(l4Seal(text, alice, [alice, bob]), bob, alice.signPub), Math.max(20, Math.floor(N / 4))),
    };
  }
  // §03 one-time
  out.one_time.jwt_sign_hs256 = measure(() => jwtSign("alice"));
  for (const bits of SIZES) {
    const { publicKey, privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: bits, publicExponent: 65537 });
    const challenge = crypto.randomBytes(16);
    out.one_time[`l3_handshake_${bits}`] = measure(() => {
      const k = crypto.randomBytes(32);
      const wrapped = crypto.publicEncrypt(OAEP(publicKey), k);
      const iv = crypto.randomBytes(12);
      const c = crypto.createCipheriv("aes-256-gcm", k, iv);
      const ct = Buffer.concat([c.update(challenge), c.final()]);
      const tag = c.getAuthTag();
      const k2 = crypto.privateDecrypt(OAEP(privateKey), wrapped);
      const d = crypto.createDecipheriv("aes-256-gcm", k2, iv);
      d.setAuthTag(tag);
      Buffer.concat([d.update(ct), d.final()]);
    }, Math.max(10, Math.floor(N / 4)), 2);
  }
  for (const bits of SIZES) {
    out.one_time[`keygen_${bits}`] = measure(() => identity(bits), KEYGEN_N, 0);
  }
  // §04 encrypt-only / decrypt-only at 1 KB
  const data = Buffer.from(textOf(1024));
  const iv = crypto.randomBytes(12);
  const aad = crypto.randomBytes(300);
  const enc = () => {
    const c = crypto.createCipheriv("aes-256-gcm", key, iv);
    c.setAAD(aad);
    const ct = Buffer.concat([c.update(data), c.final()]);
    return [ct, c.getAuthTag()];
  };
  const [ct, tag] = enc();
  const dec = (ct, tag) => {
    const d = crypto.createDecipheriv("aes-256-gcm", key, iv);
    d.setAAD(aad);
    d.setAuthTag(tag);
    return Buffer.concat([d.update(ct), d.final()]);
  };
  const sealedWeb = await subtle.encrypt({ name: "AES-GCM", iv, additionalData: aad }, webKey, data);
  out.enc_dec_1kb = {
    node_encrypt: measure(enc),
    node_decrypt: measure(() => dec(ct, tag)),
    webcrypto_encrypt: await measureAsync(() => subtle.encrypt({ name: "AES-GCM", iv, additionalData: aad }, webKey, data)),
    webcrypto_decrypt: await measureAsync(() => subtle.decrypt({ name: "AES-GCM", iv, additionalData: aad }, webKey, sealedWeb)),
    webcrypto_encrypt_decrypt: await measureAsync(async () => {
      const s = await subtle.encrypt({ name: "AES-GCM", iv, additionalData: aad }, webKey, data);
      return subtle.decrypt({ name: "AES-GCM", iv, additionalData: aad }, webKey, s);
    }),
  };
  // L4 parts at BITS, 1 KB, 2 recipients
  const text = textOf(1024);
  const env = l4Seal(text, alice, [alice, bob]);
  const input = Buffer.from(sigInput(JSON.parse(env)));
  const sig = crypto.sign(null, input, alice.signPriv);
  const cek = crypto.randomBytes(32);
  const wrapped = crypto.publicEncrypt(OAEP(bob.pub), cek);
  out.l4 = {
    rsa_oaep_wrap: measure(() => crypto.publicEncrypt(OAEP(bob.pub), cek)),
    rsa_oaep_unwrap: measure(() => crypto.privateDecrypt(OAEP(bob.priv), wrapped)),
    ed25519_sign: measure(() => crypto.sign(null, input, alice.signPriv)),
    ed25519_verify: measure(() => crypto.verify(null, input, alice.signPub, sig)),
    l4_seal: measure(() => l4Seal(text, alice, [alice, bob])),
    l4_open: measure(() => l4Open(env, bob, alice.signPub)),
  };
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
