// The other side of NatsInteropTest: the official NATS client for Node
// ("nats" on npm) reads the bridge's frames and writes frames of its own,
// from docs/nats.md alone (frame version 2, WireCodec and
// TriviallyCopyableCodec payloads). No Sluice code is used here.
//
//   NODE_PATH=<dir with node_modules/nats> node node_peer.cjs <url> <count>
//
// Prints "ready" once subscribed, then "decoded=<n> errors=<n>" (with a line
// per error before it), then "published=<n>", and exits 0.
"use strict";
const { connect } = require("nats");

const PRIORITIES = ["low", "medium", "high"];
const SENSOR_TYPE = 1;  // SensorReading: u32 sensor, f32 value, u64 seq (16 bytes)
const STOP_TYPE = 2;    // EmergencyStop: u32 source, u32 reason, u64 seq (16 bytes)
const HEADER_SIZE = 56;

function decodeFrame(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < HEADER_SIZE) throw new Error("short frame");
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== "SLNF") throw new Error("magic " + magic);
  const header = {
    version: bytes[4],
    priority: bytes[5],
    typeId: view.getUint16(6, true),
    senderId: view.getUint32(8, true),
    payloadSize: view.getUint32(12, true),
    msgId: view.getBigUint64(16, true),
    timestampNs: view.getBigUint64(24, true),
    originId: view.getBigUint64(32, true),
    instanceId: view.getBigUint64(40, true),
    sequence: view.getBigUint64(48, true),
  };
  if (header.version !== 2) throw new Error("version " + header.version);
  if (header.payloadSize !== bytes.byteLength - HEADER_SIZE) throw new Error("length");
  const payload = new DataView(bytes.buffer, bytes.byteOffset + HEADER_SIZE, header.payloadSize);
  return { header, payload };
}

function encodeFrame(header, payloadBytes) {
  const bytes = new Uint8Array(HEADER_SIZE + payloadBytes.length);
  const view = new DataView(bytes.buffer);
  bytes.set([0x53, 0x4c, 0x4e, 0x46], 0);  // "SLNF"
  bytes[4] = 2;
  bytes[5] = header.priority;
  view.setUint16(6, header.typeId, true);
  view.setUint32(8, header.senderId, true);
  view.setUint32(12, payloadBytes.length, true);
  view.setBigUint64(16, header.msgId, true);
  view.setBigUint64(24, header.timestampNs, true);
  view.setBigUint64(32, header.originId, true);
  view.setBigUint64(40, header.instanceId, true);
  view.setBigUint64(48, header.sequence, true);
  bytes.set(payloadBytes, HEADER_SIZE);
  return bytes;
}

async function main() {
  const [url, countText] = process.argv.slice(2);
  const count = Number(countText);
  const nc = await connect({ servers: url, name: "sluice-node-interop" });
  const errors = [];
  const expectedPerType = count;
  let decoded = 0;
  const lastSequence = new Map();  // subject -> last sequence seen
  const seen = { [SENSOR_TYPE]: new Set(), [STOP_TYPE]: new Set() };
  const sub = nc.subscribe("interop.b2n.*");
  await nc.flush();
  console.log("ready");

  const deadline = setTimeout(() => sub.unsubscribe(), 30000);
  for await (const m of sub) {
    try {
      const { header, payload } = decodeFrame(m.data);
      const suffix = m.subject.split(".").pop();
      if (PRIORITIES[header.priority] !== suffix) throw new Error("priority vs " + m.subject);
      const last = lastSequence.get(m.subject) || 0n;
      if (header.sequence !== last + 1n) throw new Error(`sequence ${header.sequence} after ${last}`);
      lastSequence.set(m.subject, header.sequence);
      if (header.senderId !== 11) throw new Error("sender " + header.senderId);
      if (header.payloadSize !== 16) throw new Error("payload size " + header.payloadSize);
      const seq = payload.getBigUint64(8, true);
      if (BigInt(header.priority) !== seq % 3n) throw new Error("priority of seq " + seq);
      if (header.typeId === SENSOR_TYPE) {
        if (payload.getUint32(0, true) !== 7) throw new Error("sensor id");
        if (payload.getFloat32(4, true) !== Number(seq) * 0.5) throw new Error("sensor value");
      } else if (header.typeId === STOP_TYPE) {
        if (payload.getUint32(0, true) !== 3) throw new Error("stop source");
        if (BigInt(payload.getUint32(4, true)) !== seq % 5n) throw new Error("stop reason");
      } else {
        throw new Error("type " + header.typeId);
      }
      if (seen[header.typeId].has(seq)) throw new Error("twice: " + seq);
      seen[header.typeId].add(seq);
      ++decoded;
    } catch (error) {
      errors.push(error.message);
    }
    if (decoded + errors.length >= 2 * expectedPerType) break;
  }
  clearTimeout(deadline);
  for (const error of errors) console.log("error: " + error);
  console.log(`decoded=${decoded} errors=${errors.length}`);

  // Frames into the bridge: one stream per subject, numbered from 1.
  const origin = 0x4e4f4445n;  // "NODE"
  const instance = BigInt(Date.now()) * 1000n + 7n;
  const sequences = [0n, 0n, 0n];
  let published = 0;
  for (let seq = 0; seq < count; ++seq) {
    for (const typeId of [SENSOR_TYPE, STOP_TYPE]) {
      const priority = seq % 3;
      const payload = new Uint8Array(16);
      const view = new DataView(payload.buffer);
      if (typeId === SENSOR_TYPE) {
        view.setUint32(0, 9, true);
        view.setFloat32(4, seq * 0.25, true);
      } else {
        view.setUint32(0, 4, true);
        view.setUint32(4, seq % 7, true);
      }
      view.setBigUint64(8, BigInt(seq), true);
      sequences[priority] += 1n;
      const frame = encodeFrame({
        priority, typeId, senderId: 33, msgId: BigInt(1000 + published),
        timestampNs: 123456789n, originId: origin, instanceId: instance,
        sequence: sequences[priority],
      }, payload);
      nc.publish("interop.n2b." + PRIORITIES[priority], frame);
      ++published;
    }
  }
  await nc.flush();
  console.log(`published=${published}`);
  await nc.drain();
}

main().catch((error) => {
  console.log("failed: " + error.message);
  process.exit(1);
});
