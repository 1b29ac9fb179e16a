// kafkajs transactions: a transactional producer commits (records to 3 partitions and a consumer
// group's offsets with sendOffsets), aborts, and commits again, then a last committed transaction
// writes an "end" record to every partition; a read_committed consumer (kafkajs' default) and a
// readUncommitted one read OUT until they have seen every "end"; the group's committed offsets
// are fetched with the admin client. Prints one JSON line ({"committed": [...], "uncommitted":
// [...], "offsets": {...}} or {"error": name, "message": ...}) and exits 1 on an error.
//
//   node kafkajs_txn.js BOOTSTRAP OUT IN GROUP TRANSACTIONAL_ID
//
// kafkajs is resolved from KAFKAJS_DIR (scripts/kafkajs.sh installs it in .reference/kafkajs).
const path = require("path");
const { Kafka, logLevel } = require(path.join(process.env.KAFKAJS_DIR, "node_modules", "kafkajs"));

const [bootstrap, out, input, group, transactionalId] = process.argv.slice(2);
const PARTITIONS = 3;

function records(prefix, n) {
  const messages = [];
  for (let i = 0; i < n; i++) messages.push({ partition: i % PARTITIONS, value: `${prefix}${i}` });
  return messages;
}

async function readAll(kafka, groupId, readUncommitted) {
  const consumer = kafka.consumer({ groupId, readUncommitted });
  await consumer.connect();
  await consumer.subscribe({ topic: out, fromBeginning: true });
  const values = [];
  const ends = new Set();
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out reading ${out}: ${values}`)), 60000);
    consumer
      .run({
        eachMessage: async ({ partition, message }) => {
          const value = message.value.toString();
          if (value === "end") ends.add(partition);
          else values.push(value);
          if (ends.size === PARTITIONS) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  return values;
}

async function main() {
  const kafka = new Kafka({
    clientId: "kafkajs-txn",
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 5, initialRetryTime: 100 },
    connectionTimeout: 5000,
  });
  const producer = kafka.producer({ transactionalId, maxInFlightRequests: 1, idempotent: true });
  await producer.connect();

  let txn = await producer.transaction();
  await txn.send({ topic: out, messages: records("c", 6) });
  await txn.sendOffsets({
    consumerGroupId: group,
    topics: [{ topic: input, partitions: [{ partition: 0, offset: "5" }] }],
  });
  await txn.commit();

  txn = await producer.transaction();
  await txn.send({ topic: out, messages: records("a", 3) });
  await txn.sendOffsets({
    consumerGroupId: group,
    topics: [{ topic: input, partitions: [{ partition: 0, offset: "9" }] }],
  });
  await txn.abort();

  txn = await producer.transaction();
  await txn.send({ topic: out, messages: records("d", 2) });
  await txn.commit();

  txn = await producer.transaction();
  const ends = [];
  for (let p = 0; p < PARTITIONS; p++) ends.push({ partition: p, value: "end" });
  await txn.send({ topic: out, messages: ends });
  await txn.commit();
  await producer.disconnect();

  const committed = await readAll(kafka, `${group}-rc`, false);
  const uncommitted = await readAll(kafka, `${group}-ru`, true);
  const admin = kafka.admin();
  await admin.connect();
  const fetched = await admin.fetchOffsets({ groupId: group, topics: [input] });
  await admin.disconnect();
  const offsets = {};
  for (const t of fetched) for (const p of t.partitions) offsets[p.partition] = Number(p.offset);
  console.log(JSON.stringify({ committed, uncommitted, offsets }));
}

main()
  .then(() => process.exit(0))
  .catch((e) => {
    console.log(JSON.stringify({ error: e.name, message: e.message, type: e.type || null }));
    process.exit(1);
  });
