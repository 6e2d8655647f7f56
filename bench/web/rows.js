// The bench rows that run in the browser page (served by bench/browser.py, cross-origin isolated):
// the same rows as Node's bench/peers.mjs — L3 at 100 B / 1 KB / 10 KB, AES-256-GCM encrypt and
// decrypt at 1 KB, L4 seal + open — and the recipients sweep, all through WebCrypto (jose.js).
//
// Timing: performance.now() (5 µs steps when cross-origin isolated, 100 µs otherwise). Every row
// is timed per call (median, p95, p99) and in batches (K calls timed together, K chosen so a
// batch lasts >= 2 ms; the median over batches of the mean per call). Where the per-call median
// is at least 20 timer steps both must agree; below that the batch figure is the row's median.

import * as jose from "./jose.js";

const now = () => performance.now();

export function timerStep(reads = 20000) {
  let best = Infinity, last = now();
  for (let i = 0; i < reads; i++) {
    const t = now();
    if (t > last) { best = Math.min(best, t - last); last = t; }
  }
  return best;
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function median(sorted) {
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

// Per-call and batch timing of async fn; returns {n, median_ms, p95_ms, p99_ms, per_call_median_ms,
// batch_ms, batch_k, batches, resolvable, source}.
export async function measure(fn, n, step, warmup = 5) {
  for (let i = 0; i < warmup; i++) await fn();
  const samples = [];
  for (let i = 0; i < n; i++) {
    const t0 = now();
    await fn();
    samples.push(now() - t0);
  }
  samples.sort((a, b) => a - b);
  const mean = samples.reduce((a, b) => a + b, 0) / n;
  const k = Math.max(1, Math.min(2000, Math.ceil(2 / Math.max(mean, 1e-4))));
  const batches = Math.max(5, Math.min(25, Math.floor(n / 10)));
  const per = [];
  for (let b = 0; b < batches; b++) {
    const t0 = now();
    for (let i = 0; i < k; i++) await fn();
    per.push((now() - t0) / k);
  }
  per.sort((a, b) => a - b);
  const perCall = median(samples), batch = median(per);
  const resolvable = perCall >= 20 * step;
  return { n, median_ms: resolvable ? perCall : batch, p95_ms: pct(samples, 95), p99_ms: pct(samples, 99),
    per_call_median_ms: perCall, batch_ms: batch, batch_k: k, batches, resolvable,
    source: resolvable ? "per-call" : "batch" };
}

const PAYLOADS = { "100 B": 100, "1 KB": 1024, "10 KB": 10240 };

export async function perRequest({ n, bits }, state) {
  const session = await jose.l3Session();
  const out = {};
  for (const [label, size] of Object.entries(PAYLOADS)) {
    const text = jose.textOf(size);
    let seq = 0;
    const ctx = () => ({ dir: "c2r", cid: "c1", snd: "alice", seq: ++seq });
    out[label] = {
      L3: await measure(async () => jose.openL3(session, await jose.sealL3(session, text, ctx()), "c2r"), n, state.step),
      L4: await measure(async () => jose.openL4(await jose.sealL4(text, state.alice, "c1", [state.alice, state.bob], 1, state.membership),
        state.bob, state.alice.signPublic), Math.max(20, Math.floor(n / 4)), state.step),
    };
  }
  return out;
}

export async function encDec1kb({ n }, state) {
  const subtle = globalThis.crypto.subtle;
  const data = new TextEncoder().encode(jose.textOf(1024));
  const key = await subtle.importKey("raw", jose.random(32), "AES-GCM", false, ["encrypt", "decrypt"]);
  const iv = jose.random(12), aad = jose.random(300);
  const params = { name: "AES-GCM", iv, additionalData: aad };
  const sealed = await subtle.encrypt(params, key, data);
  const session = await jose.l3Session();
  const text = jose.textOf(1024);
  let seq = 0;
  const token = await jose.sealL3(session, text, { dir: "c2r", cid: "c1", snd: "alice", seq: 1 });
  const env = await jose.sealL4(text, state.alice, "c1", [state.alice, state.bob], 1, state.membership);
  const m = (fn, k = n) => measure(fn, k, state.step);
  return {
    aes_gcm_encrypt: await m(() => subtle.encrypt(params, key, data)),
    aes_gcm_decrypt: await m(() => subtle.decrypt(params, key, sealed)),
    aes_gcm_encrypt_decrypt: await m(async () => subtle.decrypt(params, key, await subtle.encrypt(params, key, data))),
    l3_seal: await m(() => jose.sealL3(session, text, { dir: "c2r", cid: "c1", snd: "alice", seq: ++seq })),
    l3_open: await m(() => jose.openL3(session, token, "c2r")),
    l4_seal: await m(() => jose.sealL4(text, state.alice, "c1", [state.alice, state.bob], 1, state.membership), Math.max(20, Math.floor(n / 2))),
    l4_open: await m(() => jose.openL4(env, state.bob, state.alice.signPublic), Math.max(20, Math.floor(n / 2))),
  };
}

export async function l4Parts({ n }, state) {
  const subtle = globalThis.crypto.subtle;
  const cek = jose.random(32);
  const wrapped = await subtle.encrypt({ name: "RSA-OAEP" }, state.bob.wrapPublic, cek);
  const input = jose.random(600);
  const sig = await subtle.sign({ name: "Ed25519" }, state.alice.signPrivate, input);
  const k = Math.max(20, Math.floor(n / 4));
  return {
    rsa_oaep_wrap: await measure(() => subtle.encrypt({ name: "RSA-OAEP" }, state.bob.wrapPublic, cek), n, state.step),
    rsa_oaep_unwrap: await measure(() => subtle.decrypt({ name: "RSA-OAEP" }, state.bob.wrapPrivate, wrapped), k, state.step),
    ed25519_sign: await measure(() => subtle.sign({ name: "Ed25519" }, state.alice.signPrivate, input), n, state.step),
    ed25519_verify: await measure(() => subtle.verify({ name: "Ed25519" }, state.alice.signPublic, sig, input), n, state.step),
  };
}

// Seal and open against the number of recipients: `pool` distinct keys, reused under fresh key ids
// past the pool (an RSA public-key operation costs the same for any key of one size).
export async function recipients({ n, counts, pool }, state) {
  const text = jose.textOf(1024);
  const keys = [state.alice, state.bob, ...state.pool].slice(0, pool);
  const rows = {};
  for (const count of counts) {
    const rcpts = [];
    for (let i = 0; i < count; i++) {
      const k = keys[i % keys.length];
      rcpts.push(i < keys.length ? k : { ...k, wrapKid: jose.b64u(jose.random(32)) });
    }
    const reader = keys[(count - 1) % keys.length];
    rcpts[count - 1] = reader;
    if (count > keys.length) rcpts[(count - 1) % keys.length] = { ...reader, wrapKid: jose.b64u(jose.random(32)) };
    const env = await jose.sealL4(text, state.alice, "c1", rcpts, 1, state.membership);
    const k = Math.max(10, Math.min(n, Math.floor(2000 / count)));
    rows[String(count)] = {
      seal: await measure(() => jose.sealL4(text, state.alice, "c1", rcpts, 1, state.membership), k, state.step, 2),
      open: await measure(() => jose.openL4(env, reader, state.alice.signPublic), k, state.step, 2),
      envelope_bytes: env.length,
    };
  }
  return rows;
}
