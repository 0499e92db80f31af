// Reads an MCAP file with MCAP's own readers (npm @mcap/core) and prints
// what they found, one "key value" line each, for tests/record/mcap_test.cpp
// to compare with what it wrote. Exits 1, saying why, on anything the
// readers refuse or that disagrees between the file's two sections.
//
// A channel in ROS 1 encoding ("ros1", schema "ros1msg": the recorder's
// named fields) is also decoded with Foxglove's ROS 1 readers (npm
// @foxglove/rosmsg parses the definition, @foxglove/rosmsg-serialization
// reads each message), and each decoded message is written back with their
// writer, which must give the recorded bytes exactly; it prints the sum of
// every numeric field by path ("field /topic payload.pose.x 1234"; a bool
// counts 1, an array's elements are summed; a field that ever held a
// fraction is left out). Without those packages it
// prints "ros1 unchecked N".
// Usage: node check_mcap.cjs FILE
"use strict";
const fs = require("fs");
const { McapStreamReader, McapIndexedReader } = require("@mcap/core");

function loadRos1Readers() {
  try {
    const { parse } = require("@foxglove/rosmsg");
    const { MessageReader, MessageWriter } = require("@foxglove/rosmsg-serialization");
    return { parse, MessageReader, MessageWriter };
  } catch (error) {
    return undefined;
  }
}

// Adds every numeric leaf of `value` under `path` into `sums` (BigInt).
function addLeaves(sums, path, value) {
  if (typeof value === "bigint") {
    sums.set(path, (sums.get(path) ?? 0n) + value);
  } else if (typeof value === "number") {
    // A fraction (or NaN) has no exact sum: the path is left out.
    if (!Number.isInteger(value)) sums.set(path, undefined);
    if (sums.has(path) && sums.get(path) === undefined) return;
    sums.set(path, (sums.get(path) ?? 0n) + BigInt(value));
  } else if (typeof value === "boolean") {
    sums.set(path, (sums.get(path) ?? 0n) + (value ? 1n : 0n));
  } else if (ArrayBuffer.isView(value) || Array.isArray(value)) {
    for (const element of value) addLeaves(sums, path, element);
  } else if (value !== null && typeof value === "object") {
    for (const key of Object.keys(value)) addLeaves(sums, `${path}.${key}`, value[key]);
  } else {
    throw new Error(`${path}: a field of type ${typeof value}`);
  }
}

async function main() {
  const file = process.argv[2];
  const bytes = fs.readFileSync(file);
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);

  // The whole file, record by record, from the start (the data section).
  const stream = new McapStreamReader({ validateCrcs: true });
  stream.append(view);
  const records = {};
  const channels = new Map();
  const schemas = new Map();
  const perTopic = {};
  const kinds = {};
  const metadata = [];
  let messages = 0;
  let lastSequence = new Map();
  const ros1 = loadRos1Readers();
  const ros1Codecs = new Map();  // by channel id
  const fieldSums = new Map();   // "topic path" -> BigInt
  let ros1Unchecked = 0;
  for (let record; (record = stream.nextRecord()); ) {
    records[record.type] = (records[record.type] ?? 0) + 1;
    if (record.type === "Schema") schemas.set(record.id, record);
    if (record.type === "Channel") {
      if (record.schemaId !== 0 && !schemas.has(record.schemaId)) {
        throw new Error(`channel ${record.id} names schema ${record.schemaId}, not yet written`);
      }
      channels.set(record.id, record);
    }
    if (record.type === "Metadata") metadata.push(record);
    if (record.type === "Message") {
      const channel = channels.get(record.channelId);
      if (!channel) throw new Error(`a message on channel ${record.channelId}, not yet written`);
      ++messages;
      perTopic[channel.topic] = (perTopic[channel.topic] ?? 0) + 1;
      const previous = lastSequence.get(record.channelId);
      // Numbers only go up within a channel; a gap is a message the
      // recorder counted as not kept (Counts().refused, failed).
      if (previous !== undefined && record.sequence <= previous) {
        throw new Error(`channel ${channel.topic}: sequence ${record.sequence} after ${previous}`);
      }
      lastSequence.set(record.channelId, record.sequence);
      if (channel.messageEncoding === "ros1") {
        const schema = schemas.get(channel.schemaId);
        if (!schema || schema.encoding !== "ros1msg") {
          throw new Error(`channel ${channel.topic}: ros1 messages without a ros1msg schema`);
        }
        if (!ros1) {
          ++ros1Unchecked;
        } else {
          let codec = ros1Codecs.get(channel.id);
          if (!codec) {
            const definitions = ros1.parse(Buffer.from(schema.data).toString("utf8"), { ros2: false });
            codec = { reader: new ros1.MessageReader(definitions), writer: new ros1.MessageWriter(definitions) };
            ros1Codecs.set(channel.id, codec);
          }
          const value = codec.reader.readMessage(record.data);
          const again = codec.writer.writeMessage(value);
          if (Buffer.compare(Buffer.from(again), Buffer.from(record.data)) !== 0) {
            throw new Error(`channel ${channel.topic}: a message of ${record.data.length} bytes reads as one of ${again.length}`);
          }
          const sums = new Map();
          addLeaves(sums, "", value);
          for (const [path, sum] of sums) {
            const key = `${channel.topic} ${path.slice(1)}`;
            if (sum === undefined || (fieldSums.has(key) && fieldSums.get(key) === undefined)) {
              fieldSums.set(key, undefined);
            } else {
              fieldSums.set(key, (fieldSums.get(key) ?? 0n) + sum);
            }
          }
        }
      }
      if (channel.messageEncoding === "json") {
        const value = JSON.parse(Buffer.from(record.data).toString("utf8"));
        if (typeof value.kind === "string") kinds[value.kind] = (kinds[value.kind] ?? 0) + 1;
      }
    }
  }
  if (!stream.done()) throw new Error("the stream reader did not reach the closing magic");

  // The summary: the footer, the summary offsets, the statistics.
  const readable = {
    size: async () => BigInt(bytes.byteLength),
    read: async (offset, length) =>
      new Uint8Array(bytes.buffer, bytes.byteOffset + Number(offset), Number(length)),
  };
  const indexed = await McapIndexedReader.Initialize({ readable });
  const statistics = indexed.statistics;
  if (!statistics) throw new Error("no Statistics record in the summary");
  if (Number(statistics.messageCount) !== messages) {
    throw new Error(`statistics say ${statistics.messageCount} messages; the file holds ${messages}`);
  }
  for (const [id, count] of statistics.channelMessageCounts) {
    const topic = channels.get(id)?.topic;
    if (Number(count) !== (perTopic[topic] ?? 0)) {
      throw new Error(`statistics say ${count} messages on ${topic}; the file holds ${perTopic[topic] ?? 0}`);
    }
  }
  if (indexed.channelsById.size !== channels.size || indexed.schemasById.size !== schemas.size) {
    throw new Error("the summary's schemas or channels differ from the data section's");
  }
  for (const [id, channel] of indexed.channelsById) {
    const data = channels.get(id);
    if (!data || data.topic !== channel.topic || data.schemaId !== channel.schemaId) {
      throw new Error(`the summary's channel ${id} differs from the data section's`);
    }
  }

  // Metadata: the statistics' count, one index each in the summary, and
  // what the indexed reader reads through them equal to the data section's.
  if (statistics.metadataCount !== metadata.length) {
    throw new Error(`statistics say ${statistics.metadataCount} metadata records; the file holds ${metadata.length}`);
  }
  if (indexed.metadataIndexes.length !== metadata.length) {
    throw new Error(`the summary indexes ${indexed.metadataIndexes.length} metadata records; the file holds ${metadata.length}`);
  }
  const indexedMetadata = [];
  for await (const record of indexed.readMetadata()) indexedMetadata.push(record);
  if (indexedMetadata.length !== metadata.length) {
    throw new Error("the indexed reader read a different number of metadata records");
  }
  indexedMetadata.forEach((record, i) => {
    const data = metadata[i];
    if (record.name !== data.name || JSON.stringify([...record.metadata]) !== JSON.stringify([...data.metadata])) {
      throw new Error(`metadata record ${i} (${data.name}) differs between the index and the data section`);
    }
  });

  console.log(`messages ${messages}`);
  for (const record of metadata) {
    for (const [key, value] of record.metadata) {
      if (/^[0-9]+$/.test(value)) console.log(`meta ${record.name}.${key} ${value}`);
    }
  }
  for (const type of Object.keys(records).sort()) console.log(`record ${type} ${records[type]}`);
  for (const topic of Object.keys(perTopic).sort()) console.log(`topic ${topic} ${perTopic[topic]}`);
  for (const kind of Object.keys(kinds).sort()) console.log(`kind ${kind} ${kinds[kind]}`);
  for (const key of [...fieldSums.keys()].sort()) {
    if (fieldSums.get(key) !== undefined) {
      console.log(`field ${key} ${BigInt.asUintN(64, fieldSums.get(key))}`);
    }
  }
  if (ros1Unchecked !== 0) console.log(`ros1 unchecked ${ros1Unchecked}`);
}

main().catch((error) => {
  console.error(`check_mcap: ${error.message}`);
  process.exit(1);
});
