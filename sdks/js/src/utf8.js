// UTF-8 encoding and strict decoding: the platform's TextEncoder/TextDecoder when
// the engine has them (StarlingMonkey, Node), else a plain-JS fallback (QuickJS).

const Encoder = globalThis.TextEncoder;
const Decoder = globalThis.TextDecoder;
const encoder = Encoder ? new Encoder() : undefined;
const decoder = Decoder ? new Decoder('utf-8', { fatal: true }) : undefined;

/** The UTF-8 bytes of `text` (lone surrogates become U+FFFD, as TextEncoder does). */
export function encodeUtf8(text) {
  if (encoder) return encoder.encode(text);
  const out = [];
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i += 1;
      }
    }
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

/** The text of UTF-8 `bytes`; throws a TypeError on invalid UTF-8. */
export function decodeUtf8(bytes) {
  if (decoder) return decoder.decode(bytes);
  let out = '';
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    let c;
    let n;
    if (b < 0x80) (c = b), (n = 0);
    else if (b >= 0xc2 && b < 0xe0) (c = b & 31), (n = 1);
    else if (b >= 0xe0 && b < 0xf0) (c = b & 15), (n = 2);
    else if (b >= 0xf0 && b < 0xf5) (c = b & 7), (n = 3);
    else throw new TypeError(`invalid UTF-8 byte 0x${b.toString(16)} at ${i}`);
    for (let k = 1; k <= n; k++) {
      const next = bytes[i + k];
      if (next === undefined || (next & 0xc0) !== 0x80) throw new TypeError(`invalid UTF-8 continuation at ${i + k}`);
      c = (c << 6) | (next & 63);
    }
    const min = [0, 0x80, 0x800, 0x10000][n];
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) throw new TypeError(`invalid UTF-8 sequence at ${i}`);
    out += String.fromCodePoint(c);
    i += n + 1;
  }
  return out;
}
