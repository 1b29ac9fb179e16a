// kafkajs against a SASL listener: produce N records to TOPIC, then read them back in a consumer
// group; prints one JSON line ({"produced": N, "consumed": [...]} or {"error": name, "message": ...})
// and exits 1 on an error.
//
//   node kafkajs_probe.js BOOTSTRAP MECHANISM USER PASSWORD CA_FILE TOPIC N
//
// kafkajs is resolved from KAFKAJS_DIR (scripts/kafkajs.sh installs it in .reference/kafkajs).
const path = require("path");
const fs = require("fs");
const { Kafka, logLevel } = require(path.join(process.env.KAFKAJS_DIR, "node_modules", "kafkajs"));

const [bootstrap, mechanism, username, password, caFile, topic, nText] = process.argv.slice(2);
const n = parseInt(nText, 10);

async function main() {
  const kafka = new Kafka({
    clientId: "kafkajs-probe",
    brokers: [bootstrap],
    ssl: { ca: [fs.readFileSync(caFile, "utf-8")] },
    sasl: { mechanism: mechanism.toLowerCase(), username, password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100 },
    connectionTimeout: 5000,
  });
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < n; i++) messages.push({ key: String(i), value: "v" + i });
  await producer.send({ topic, messages, acks: -1 });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: "kjs-" + topic });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out consuming")), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push(message.value.toString());
        if (consumed.length >= n) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ produced: n, consumed }));
}

main().then(() => process.exit(0)).catch((e) => {
  console.log(JSON.stringify({ error: e.name, message: e.message, type: e.type || null }));
  process.exit(1);
});
