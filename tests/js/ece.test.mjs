// Tests of streamcrypt/web/ece.js under Node's own runner: `node --expose-gc --test tests/js/`.
// tests/test_browser_module.py runs them with ECE_VECTORS naming a file of vectors the
// Python codec wrote (every record-size edge, and how Python classifies broken bodies).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as ece from "../../streamcrypt/web/ece.js";

const b64u = (text) => new Uint8Array(Buffer.from(text.replace(/\s+/g, ""), "base64url"));
const hex = (text) => new Uint8Array(Buffer.from(text, "hex"));
const toHex = (bytes) => Buffer.from(bytes).toString("hex");
const WALRUS = new TextEncoder().encode("I am the walrus");

// RFC 8188 section 3.1 and 3.2, transcribed from the RFC text (base64url).
const RFC_3_1 = {
  ikm: b64u("yqdlZ-tYemfogSmv7Ws5PQ"),
  body: b64u("I1BsxtFttlv3u_Oo94xnmwAAEAAA-NAVub2qFgBEuQKRapoZu-IxkIva3MEB1PD-ly8Thjg"),
};
const RFC_3_2 = {
  ikm: b64u("BO3ZVPxUlnLORbVGMpbT1Q"),
  body: b64u(
    "uNCkWiNYzKTnBN9ji3-qWAAAABkCYTHOG8chz_gnvgOqdGYovxyjuqRyJFjEDyoF1Fvkj6hQPdPHI51OEUKEpgz3SsLWIqS_uA",
  ),
};

function streamOfPieces(bytes, size) {
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
}

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(...part);
  return new Uint8Array(parts);
}

const decryptIn = (body, size, options) => collect(streamOfPieces(body, size).pipeThrough(ece.decryptStream(options)));

test("RFC 8188 section 3.1: one record, rs 4096, no key id", async () => {
  assert.equal(RFC_3_1.body.length, 53);
  assert.deepEqual(await ece.decrypt(RFC_3_1.body, { key: RFC_3_1.ikm }), WALRUS);
  const salt = RFC_3_1.body.slice(0, 16);
  assert.deepEqual(await ece.encrypt(WALRUS, { key: RFC_3_1.ikm, salt, recordSize: 4096 }), RFC_3_1.body);
});

test("RFC 8188 section 3.2: rs 25, key id a1, a padding octet", async () => {
  assert.equal(RFC_3_2.body.length, 73);
  assert.deepEqual(await ece.decrypt(RFC_3_2.body, { key: RFC_3_2.ikm }), WALRUS);
  assert.deepEqual(await ece.decrypt(RFC_3_2.body, { key: { a1: RFC_3_2.ikm } }), WALRUS);
  assert.deepEqual(await ece.decrypt(RFC_3_2.body, { key: new Map([["a1", RFC_3_2.ikm]]) }), WALRUS);
  for (const size of [1, 2, 7, 23, 24, 25, 48]) assert.deepEqual(await decryptIn(RFC_3_2.body, size, { key: RFC_3_2.ikm }), WALRUS);
  await assert.rejects(ece.decrypt(RFC_3_2.body, { key: { b2: RFC_3_2.ikm } }), ece.UnknownKeyError);
  await assert.rejects(ece.decrypt(RFC_3_2.body, { key: () => null }), ece.UnknownKeyError);
});

test("any chunking, any record size: a round trip gives the same bytes", async () => {
  const key = ece.generateKey();
  for (const rs of [18, 19, 25, 100, 4096]) {
    const d = rs - ece.OVERHEAD;
    for (const n of [0, 1, d - 1, d, d + 1, 2 * d, 2 * d + 1, 5 * d + 3]) {
      const data = crypto.getRandomValues(new Uint8Array(Math.max(n, 0)));
      const body = await collect(streamOfPieces(data, 7).pipeThrough(ece.encryptStream({ key, recordSize: rs, keyid: "k1" })));
      assert.deepEqual(body, await ece.encrypt(data, { key, recordSize: rs, keyid: "k1", salt: body.slice(0, 16) }));
      for (const size of [1, 3, rs, rs + 1, 1 << 20]) {
        assert.deepEqual(await decryptIn(body, size, { key: { k1: key } }), data, `rs ${rs} n ${n} piece ${size}`);
      }
    }
  }
});

async function multiRecordBody() {
  const key = ece.generateKey();
  const data = new Uint8Array(100).map((_, i) => i + 1);
  const body = await ece.encrypt(data, { key, recordSize: 25 }); // 8 data bytes per record: 13 records
  return { key, data, body, header: 21, rs: 25 };
}

test("truncation is refused at every length", async () => {
  const { key, body } = await multiRecordBody();
  for (let cut = 0; cut < body.length; cut++) {
    await assert.rejects(
      ece.decrypt(body.slice(0, cut), { key }),
      (err) => err instanceof ece.TruncatedStreamError || err instanceof ece.AuthenticationError,
      `cut at ${cut}`,
    );
  }
  // Cut at a record boundary: the last record received says more was to come.
  await assert.rejects(ece.decrypt(body.slice(0, 21 + 25 * 3), { key }), ece.TruncatedStreamError);
  await assert.rejects(ece.decrypt(body.slice(0, 21), { key }), ece.TruncatedStreamError);
  await assert.rejects(ece.decrypt(body.slice(0, 10), { key }), ece.TruncatedStreamError);
});

test("every flipped bit is refused, and nothing of the altered record is released", async () => {
  const { key, body } = await multiRecordBody();
  for (let at = 21; at < body.length; at += 3) {
    const bad = body.slice();
    bad[at] ^= 0x40;
    const released = [];
    const stream = streamOfPieces(bad, 25).pipeThrough(ece.decryptStream({ key }));
    await assert.rejects(
      (async () => {
        for await (const part of stream) released.push(...part);
      })(),
      ece.AuthenticationError,
    );
    const record = Math.floor((at - 21) / 25);
    assert.ok(released.length <= record * 8, `byte ${at}: ${released.length} bytes released`);
  }
});

test("reordered, dropped and duplicated records are refused", async () => {
  const { key, body } = await multiRecordBody();
  const rec = (i) => body.slice(21 + 25 * i, 21 + 25 * (i + 1));
  const head = body.slice(0, 21);
  const join = (...parts) => new Uint8Array(parts.flatMap((p) => [...p]));
  const rest = body.slice(21 + 25 * 3);
  await assert.rejects(ece.decrypt(join(head, rec(1), rec(0), rec(2), rest), { key }), ece.AuthenticationError);
  await assert.rejects(ece.decrypt(join(head, rec(0), rec(2), rest), { key }), ece.AuthenticationError);
  await assert.rejects(ece.decrypt(join(head, rec(0), rec(0), rec(1), rec(2), rest), { key }), ece.AuthenticationError);
  await assert.rejects(ece.decrypt(body, { key: ece.generateKey() }), ece.AuthenticationError);
});

test("bad headers and limits", async () => {
  const { key, body } = await multiRecordBody();
  const bad = body.slice();
  new DataView(bad.buffer).setUint32(16, 17);
  await assert.rejects(ece.decrypt(bad, { key }), ece.FormatError);
  await assert.rejects(ece.decrypt(body, { key, maxRecordSize: 24 }), ece.LimitExceededError);
  assert.throws(() => ece.encryptStream({ key: new Uint8Array(15) }), ece.InvalidParameterError);
  assert.throws(() => ece.encryptStream({ key, recordSize: 17 }), ece.InvalidParameterError);
  assert.throws(() => ece.encryptStream({ key, keyid: "x".repeat(256) }), ece.InvalidParameterError);
  assert.ok(new ece.AuthenticationError("x") instanceof ece.StreamCryptError);
  assert.equal(new ece.TruncatedStreamError("x").name, "TruncatedStreamError");
});

test("keys travel as base64url", () => {
  const key = ece.generateKey();
  const text = ece.encodeKey(key);
  assert.match(text, /^[A-Za-z0-9_-]{22}$/);
  assert.deepEqual(ece.decodeKey(text), key);
  assert.throws(() => ece.decodeKey("short"), ece.InvalidParameterError);
});

test("memory stays bounded: 64 MiB decrypted as it streams", { skip: globalThis.gc ? false : "needs node --expose-gc" }, async () => {
  const key = ece.generateKey();
  const piece = new Uint8Array(1 << 20).fill(7);
  const total = 64;
  let sent = 0;
  const source = new ReadableStream({
    pull(controller) {
      if (sent++ === total) return controller.close();
      controller.enqueue(piece);
    },
  }, { highWaterMark: 0 });
  let peak = 0;
  let got = 0;
  const stream = source.pipeThrough(ece.encryptStream({ key })).pipeThrough(ece.decryptStream({ key }));
  const before = process.memoryUsage().arrayBuffers;
  let next = 0;
  for await (const part of stream) {
    got += part.length;
    if (got >= next && globalThis.gc) {
      // Live memory after a collection: what the streams hold, not garbage not yet swept.
      globalThis.gc();
      peak = Math.max(peak, process.memoryUsage().arrayBuffers - before);
      next += 4 << 20;
    }
  }
  assert.equal(got, total << 20);
  // Bounded: a few MiB of queued chunks and backing stores not yet freed (it varies with
  // the collector), never the body (64 MiB).
  assert.ok(peak < 24 << 20, `live array buffers grew by ${peak} bytes for a 64 MiB body`);
});

const vectorsFile = process.env.ECE_VECTORS;

test("vectors written by the Python codec", { skip: vectorsFile ? false : "ECE_VECTORS not set (tests/test_browser_module.py sets it)" }, async () => {
  const vectors = JSON.parse(readFileSync(vectorsFile, "utf8"));
  let ran = 0;
  for (const v of vectors.bodies) {
    const key = hex(v.key);
    const body = hex(v.body);
    const data = hex(v.plaintext);
    const source = v.keyid ? { [v.keyid]: key } : key;
    assert.deepEqual(await ece.decrypt(body, { key: source }), data, `decrypt rs ${v.rs} n ${data.length}`);
    assert.deepEqual(await decryptIn(body, body.length < 8192 ? 5 : 4093, { key: source }), data);
    if (!v.padding) {
      const mine = await ece.encrypt(data, { key, salt: hex(v.salt), recordSize: v.rs, keyid: v.keyid });
      assert.equal(toHex(mine), v.body, `encrypt rs ${v.rs} n ${data.length}`);
    }
    ran++;
  }
  for (const v of vectors.broken) {
    await assert.rejects(ece.decrypt(hex(v.body), { key: hex(v.key) }), (err) => {
      assert.equal(err.name, v.error, `${v.what}: Python says ${v.error}, this module ${err.name}`);
      return true;
    });
    ran++;
  }
  assert.equal(ran, vectors.bodies.length + vectors.broken.length);
  console.log(`python vectors: ${ran}`);
});
