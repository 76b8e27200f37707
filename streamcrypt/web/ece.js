// streamcrypt/web/ece.js: RFC 8188 "aes128gcm" bodies in the browser (and Node >= 20).
//
// A plain ES module: no build step, no dependency, WebCrypto (HKDF-SHA256, AES-128-GCM)
// and WHATWG streams only. It speaks the format of streamcrypt.codecs.ece byte for byte:
//
//   body   = salt (16) || rs (uint32 BE) || idlen (1) || keyid (idlen) || record_0 .. record_n
//   CEK    = HKDF(salt, IKM, "Content-Encoding: aes128gcm\0", 16)
//   NONCE  = HKDF(salt, IKM, "Content-Encoding: nonce\0", 12)
//   record_i = AES-128-GCM(CEK, NONCE xor uint96_be(i), data || delimiter || 0x00*k)
//
// rs is the ciphertext size of every record but the last; the delimiter is 0x02 in the
// last record and 0x01 in every other. The decryptor holds back one full record until it
// knows whether more bytes follow (the last record may be exactly rs long), releases a
// record's bytes only after its tag verified, and raises a typed error for a cut-off,
// altered, reordered or malformed body. Key ids are the UTF-8 key ids of a streamcrypt
// KeyRing: the middleware writes its active key's id and reads a request's key by it.
//
// Memory: an encryptor or decryptor holds one record being filled, the chunk it was
// given, and at most 8 records in WebCrypto at once (WINDOW), released in order.

const SALT_SIZE = 16;
const TAG_SIZE = 16;
const HEADER_SIZE = 21;
/** Bytes a record adds to its data: the delimiter and the GCM tag. */
export const OVERHEAD = TAG_SIZE + 1;
/** RFC 8188 section 2.1: record sizes below 18 are invalid. */
export const MIN_RECORD_SIZE = OVERHEAD + 1;
/** The record size streamcrypt's middlewares write and accept by default (64 KiB). */
export const DEFAULT_RECORD_SIZE = 1 << 16;
/** The largest record a decryptor buffers unless told otherwise (hostile rs). */
export const DEFAULT_MAX_RECORD_SIZE = 1 << 24;
/** The HTTP Content-Encoding token. */
export const CONTENT_ENCODING = "aes128gcm";
export const KEY_SIZE = 16;
// RFC 8188 section 4.4: fewer than 2^44.5 blocks of 16 octets under one key and salt;
// a record counter never reaches 2^36 at the smallest record size, so 2^36 is the cap.
const MAX_RECORDS = 2 ** 36;

const encoder = new TextEncoder();
const CEK_INFO = encoder.encode("Content-Encoding: aes128gcm\0");
const NONCE_INFO = encoder.encode("Content-Encoding: nonce\0");

// --- errors -------------------------------------------------------------------------

/** Root of every error this module raises (mirrors streamcrypt.errors). */
export class StreamCryptError extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}
/** A record's tag failed: wrong key, altered, reordered or spliced records. */
export class AuthenticationError extends StreamCryptError {}
/** The body ended before its last record (a cut-off download or upload). */
export class TruncatedStreamError extends StreamCryptError {}
/** Not an aes128gcm body: bad header, missing or wrong delimiter. */
export class FormatError extends StreamCryptError {}
/** A record size above the decryptor's limit, or too many records. */
export class LimitExceededError extends StreamCryptError {}
/** The header's key id names no key the decryptor knows. */
export class UnknownKeyError extends StreamCryptError {}
/** A bad argument (key size, record size, key id length). */
export class InvalidParameterError extends StreamCryptError {}

// --- keys ---------------------------------------------------------------------------

function bytesOf(value, what) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw new InvalidParameterError(`${what} must be a Uint8Array or ArrayBuffer`);
}

function checkKey(key) {
  const raw = bytesOf(key, "key");
  if (raw.length !== KEY_SIZE) {
    throw new InvalidParameterError(`an aes128gcm key is ${KEY_SIZE} bytes, got ${raw.length}`);
  }
  return raw;
}

/** 16 random bytes: a fresh aes128gcm key. */
export function generateKey() {
  return crypto.getRandomValues(new Uint8Array(KEY_SIZE));
}

/** A key as base64url without padding (what goes into a URL fragment). */
export function encodeKey(key) {
  const raw = checkKey(key);
  let text = "";
  for (const b of raw) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The key of a base64url text (as written by encodeKey). Raises InvalidParameterError. */
export function decodeKey(text) {
  let raw;
  try {
    const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    raw = Uint8Array.from(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)), (c) => c.charCodeAt(0));
  } catch {
    throw new InvalidParameterError("the key is not base64url text");
  }
  return checkKey(raw);
}

async function deriveRecordKey(ikm, salt) {
  const base = await crypto.subtle.importKey("raw", ikm, "HKDF", false, ["deriveBits"]);
  const bits = (info, length) =>
    crypto.subtle.deriveBits({ name: "HKDF", hash: "SHA-256", salt, info }, base, length * 8);
  const [cek, nonce] = await Promise.all([bits(CEK_INFO, 16), bits(NONCE_INFO, 12)]);
  const key = await crypto.subtle.importKey("raw", cek, "AES-GCM", false, ["encrypt", "decrypt"]);
  return { key, nonce: new Uint8Array(nonce) };
}

function recordNonce(base, index) {
  const nonce = base.slice();
  // index < 2^36: the low 32 bits and the rest, XORed into the last 8 bytes, big endian.
  const view = new DataView(nonce.buffer);
  view.setUint32(8, view.getUint32(8) ^ (index >>> 0));
  view.setUint32(4, view.getUint32(4) ^ Math.floor(index / 2 ** 32));
  return nonce;
}

async function lookup(source, keyid) {
  // One key: the header's key id is ignored (as in the Python codec).
  if (source instanceof Uint8Array || source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return checkKey(source);
  }
  let text = null;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(keyid);
  } catch {
    text = null;
  }
  let found;
  if (typeof source === "function") found = await source(text, keyid);
  else if (source instanceof Map) found = text === null ? undefined : source.get(text);
  else if (source && typeof source === "object" && text !== null && Object.hasOwn(source, text)) {
    found = source[text];
  }
  if (found === undefined || found === null) {
    const shown = (text ?? "(not UTF-8)").slice(0, 64);
    throw new UnknownKeyError(`no key for key id ${JSON.stringify(shown)}: check the key ring`);
  }
  return checkKey(found);
}

// --- a byte queue that never copies more than it hands out ---------------------------

class ByteQueue {
  constructor() {
    this.chunks = [];
    this.length = 0;
  }
  push(chunk) {
    if (chunk.length) {
      this.chunks.push(chunk);
      this.length += chunk.length;
    }
  }
  take(n) {
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const head = this.chunks[0];
      const want = n - filled;
      if (head.length <= want) {
        out.set(head, filled);
        filled += head.length;
        this.chunks.shift();
      } else {
        out.set(head.subarray(0, want), filled);
        this.chunks[0] = head.subarray(want);
        filled += want;
      }
    }
    this.length -= n;
    return out;
  }
}

/** Records sealed or opened at once: WebCrypto answers each call a task later, so one
 *  record at a time would wait a round trip per record; a window keeps several in flight
 *  and bounds memory to WINDOW records. Output stays in order. */
const WINDOW = 8;

class InFlight {
  constructor() {
    this.queue = [];
  }
  /** Add a job; once WINDOW are waiting, hand the oldest's result to release(). */
  async add(job, release) {
    job.catch(() => {}); // awaited below, in order; this only stops "unhandled" reports
    this.queue.push(job);
    while (this.queue.length > WINDOW) release(await this.queue.shift());
  }
  /** Hand every waiting result to release(), in order. */
  async drain(release) {
    while (this.queue.length) release(await this.queue.shift());
  }
}

function toBytes(chunk) {
  if (typeof chunk === "string") return encoder.encode(chunk);
  return bytesOf(chunk, "a stream chunk");
}

function checkRecordSize(rs) {
  if (!Number.isInteger(rs) || rs < MIN_RECORD_SIZE || rs > 0xffffffff) {
    throw new InvalidParameterError(`record size must be an integer in ${MIN_RECORD_SIZE}..${0xffffffff}`);
  }
}

// --- encryption ---------------------------------------------------------------------

/**
 * A TransformStream that encrypts plaintext chunks into one aes128gcm body.
 * options: key (16 bytes, required), keyid (string or bytes, default none),
 * recordSize (rs, default 64 KiB), salt (16 bytes; random by default: never reuse one).
 * Raises InvalidParameterError for bad options.
 */
export function encryptStream({ key, keyid = "", recordSize = DEFAULT_RECORD_SIZE, salt } = {}) {
  const ikm = checkKey(key);
  checkRecordSize(recordSize);
  const kid = typeof keyid === "string" ? encoder.encode(keyid) : bytesOf(keyid, "keyid");
  if (kid.length > 255) throw new InvalidParameterError("a key id holds at most 255 bytes");
  const saltBytes = salt === undefined ? crypto.getRandomValues(new Uint8Array(SALT_SIZE)) : bytesOf(salt, "salt");
  if (saltBytes.length !== SALT_SIZE) throw new InvalidParameterError("the salt is 16 bytes");
  const dataSize = recordSize - OVERHEAD;
  const pending = new ByteQueue();
  const inflight = new InFlight();
  let derived = null;
  let index = 0;

  const seal = async (data, last) => {
    if (index >= MAX_RECORDS) throw new LimitExceededError("too many records under one salt");
    const plain = new Uint8Array(data.length + 1);
    plain.set(data);
    plain[data.length] = last ? 2 : 1;
    const iv = recordNonce(derived.nonce, index++);
    return new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, derived.key, plain));
  };

  return new TransformStream({
    async start(controller) {
      derived = await deriveRecordKey(ikm, saltBytes);
      const header = new Uint8Array(HEADER_SIZE + kid.length);
      header.set(saltBytes);
      new DataView(header.buffer).setUint32(SALT_SIZE, recordSize);
      header[20] = kid.length;
      header.set(kid, HEADER_SIZE);
      controller.enqueue(header);
    },
    async transform(chunk, controller) {
      pending.push(toBytes(chunk));
      // A record is sealed as not-last only once more data follows it.
      const release = (record) => controller.enqueue(record);
      while (pending.length > dataSize) await inflight.add(seal(pending.take(dataSize), false), release);
    },
    async flush(controller) {
      const release = (record) => controller.enqueue(record);
      await inflight.add(seal(pending.take(pending.length), true), release);
      await inflight.drain(release);
    },
  });
}

// --- decryption ---------------------------------------------------------------------

/**
 * A TransformStream that decrypts one aes128gcm body into its plaintext, releasing each
 * record's data only after its tag verified.
 * options: key: one 16-byte key (the header's key id is ignored), an object or Map from
 * key id to key, or a function (keyid text or null, keyid bytes) -> key (or a promise);
 * maxRecordSize (default 16 MiB).
 * The readable side errors with AuthenticationError, TruncatedStreamError, FormatError,
 * LimitExceededError or UnknownKeyError.
 */
export function decryptStream({ key, maxRecordSize = DEFAULT_MAX_RECORD_SIZE } = {}) {
  if (key === undefined || key === null) throw new InvalidParameterError("decryptStream needs a key");
  const pending = new ByteQueue();
  const inflight = new InFlight();
  let rs = 0;
  let derived = null;
  let index = 0;
  let records = 0;

  const readHeader = async () => {
    if (pending.length < HEADER_SIZE) return false;
    // The fixed part read from one piece: join the queue into one when it came in smaller ones.
    if (pending.chunks[0].length < HEADER_SIZE) pending.push(pending.take(pending.length));
    const fixed = pending.chunks[0];
    const view = new DataView(fixed.buffer, fixed.byteOffset, HEADER_SIZE);
    const size = view.getUint32(SALT_SIZE);
    const idlen = fixed[20];
    if (size < MIN_RECORD_SIZE) {
      throw new FormatError(`aes128gcm header has record size ${size}; values below 18 are invalid: not an aes128gcm body`);
    }
    if (size > maxRecordSize) {
      throw new LimitExceededError(`aes128gcm record size ${size} exceeds this decryptor's limit of ${maxRecordSize}`);
    }
    if (pending.length < HEADER_SIZE + idlen) return false;
    const header = pending.take(HEADER_SIZE + idlen);
    const ikm = await lookup(key, header.subarray(HEADER_SIZE));
    derived = await deriveRecordKey(ikm, header.slice(0, SALT_SIZE));
    rs = size;
    return true;
  };

  const open = async (record, last) => {
    const i = index++;
    if (i >= MAX_RECORDS) throw new LimitExceededError("too many records under one salt");
    if (last && record.length < OVERHEAD) {
      throw new TruncatedStreamError("the aes128gcm body ends inside its last record: it was cut off");
    }
    let plain;
    try {
      const iv = recordNonce(derived.nonce, i);
      plain = new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv }, derived.key, record));
    } catch {
      throw new AuthenticationError(
        `aes128gcm record ${i} failed authentication: wrong key, or the body was altered, reordered or cut`,
      );
    }
    let end = plain.length - 1;
    while (end >= 0 && plain[end] === 0) end--;
    if (end < 0) throw new FormatError(`aes128gcm record ${i} holds no delimiter`);
    const delimiter = plain[end];
    if (delimiter === 1 && last) {
      throw new TruncatedStreamError("the aes128gcm body ends before its last record: it was cut off");
    }
    if (delimiter === 2 && !last) throw new FormatError(`aes128gcm record ${i} is marked last but more follows`);
    if (delimiter !== 1 && delimiter !== 2) throw new FormatError(`aes128gcm record ${i} has delimiter ${delimiter}`);
    return plain.subarray(0, end);
  };

  return new TransformStream({
    async transform(chunk, controller) {
      pending.push(toBytes(chunk));
      if (!derived && !(await readHeader())) return;
      // Hold back one full record until a byte after it shows it is not the last.
      const release = (plain) => plain.length && controller.enqueue(plain);
      while (pending.length > rs) {
        records++;
        await inflight.add(open(pending.take(rs), false), release);
      }
    },
    async flush(controller) {
      if (!derived) {
        if (pending.length >= HEADER_SIZE) await readHeader(); // raises on a bad header
        throw new TruncatedStreamError("the aes128gcm body ends inside its header: it was cut off");
      }
      const release = (plain) => plain.length && controller.enqueue(plain);
      await inflight.drain(release); // an earlier record's failure comes first
      if (pending.length === 0 && records === 0) {
        throw new TruncatedStreamError("the aes128gcm body has a header and no record: it was cut off");
      }
      if (pending.length === 0) {
        throw new TruncatedStreamError("the aes128gcm body ends before its last record: it was cut off");
      }
      release(await open(pending.take(pending.length), true));
    },
  });
}

// --- whole bodies -------------------------------------------------------------------

async function collect(stream) {
  const parts = [];
  let size = 0;
  for await (const part of stream) {
    parts.push(part);
    size += part.length;
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

function streamOf(data) {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(toBytes(data));
      controller.close();
    },
  });
}

/** Encrypt a whole body (bytes or string) at once; options as for encryptStream. */
export function encrypt(data, options) {
  return collect(streamOf(data).pipeThrough(encryptStream(options)));
}

/** Decrypt a whole aes128gcm body at once; options as for decryptStream. */
export function decrypt(data, options) {
  return collect(streamOf(data).pipeThrough(decryptStream(options)));
}

// --- fetch --------------------------------------------------------------------------

function bodyStream(body) {
  if (body instanceof ReadableStream) return body;
  if (typeof Blob !== "undefined" && body instanceof Blob) return body.stream();
  return streamOf(body);
}

function counted(stream, onProgress) {
  if (!onProgress) return stream;
  let done = 0;
  return stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        done += chunk.length;
        onProgress(done);
        controller.enqueue(chunk);
      },
    }),
  );
}

/** A stream's bytes as a Blob, gathered 4 MiB at a time, so the page's heap holds one
 *  such piece while the browser's blob storage holds the rest. */
async function toBlob(stream) {
  const blobs = [];
  let parts = [];
  let size = 0;
  for await (const part of stream) {
    parts.push(part);
    size += part.length;
    if (size >= 4 << 20) {
      blobs.push(new Blob(parts));
      parts = [];
      size = 0;
    }
  }
  blobs.push(new Blob(parts));
  return new Blob(blobs);
}

/**
 * fetch() with an aes128gcm request body and response.
 *
 * options (besides fetch's own init): key (16 bytes: encrypts the request body),
 * keyid (written into the request body's header: the id of the key in the server's
 * KeyRing), decryptKey (what decryptStream takes; default key), recordSize,
 * upload: "stream" sends the body as it is encrypted (fetch upload streaming: Chromium
 * needs HTTP/2 or later for it and fails with a TypeError over HTTP/1.1), "buffer"
 * encrypts it into a Blob first (works over HTTP/1.1; Chromium keeps large Blobs on disk);
 * default "buffer". onUploadProgress(plaintextBytes), onDownloadProgress(plaintextBytes).
 *
 * Resolves to a Response whose body is the verified plaintext, streamed: reading it
 * rejects with the module's typed errors. A response without Content-Encoding:
 * aes128gcm is refused (FormatError) unless allowClear is true; a non-2xx answer is
 * returned as it came (the middleware's own error answers are in clear).
 */
export async function encryptedFetch(input, options = {}) {
  const {
    key,
    keyid = "",
    decryptKey = key,
    recordSize = DEFAULT_RECORD_SIZE,
    upload = "buffer",
    onUploadProgress,
    onDownloadProgress,
    allowClear = false,
    ...init
  } = options;
  const headers = new Headers(init.headers);
  if (init.body !== undefined && init.body !== null) {
    const sealed = counted(bodyStream(init.body), onUploadProgress).pipeThrough(
      encryptStream({ key, keyid, recordSize }),
    );
    headers.set("Content-Encoding", CONTENT_ENCODING);
    if (upload === "stream") {
      init.body = sealed;
      init.duplex = "half";
    } else if (upload === "buffer") {
      init.body = await toBlob(sealed);
    } else {
      throw new InvalidParameterError(`upload must be "stream" or "buffer", not ${JSON.stringify(upload)}`);
    }
  }
  const response = await fetch(input, { ...init, headers });
  const coding = (response.headers.get("Content-Encoding") || "").toLowerCase().trim();
  if (coding !== CONTENT_ENCODING) {
    if (allowClear || !response.ok || response.body === null) return response;
    throw new FormatError(`the response is not encrypted (Content-Encoding: ${JSON.stringify(coding)})`);
  }
  const body = counted(response.body.pipeThrough(decryptStream({ key: decryptKey })), onDownloadProgress);
  const out = new Headers(response.headers);
  out.delete("Content-Encoding");
  out.delete("Content-Length");
  return new Response(body, { status: response.status, statusText: response.statusText, headers: out });
}
