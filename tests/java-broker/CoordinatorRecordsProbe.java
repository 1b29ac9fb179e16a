import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HexFormat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordType;

/**
 * Decodes coordinator records (the key and value of a {@code __consumer_offsets} record) with the
 * Kafka broker's own generated record classes, for tests/coordinator/test_records_kafka.py.
 *
 * <pre>
 *   java CoordinatorRecordsProbe IN
 *   java CoordinatorRecordsProbe embedded IN
 * </pre>
 *
 * Each line of IN is "KEY\tVALUE": hex bytes, the key with its int16 record type, the value with its
 * int16 version ("-" for a tombstone). For each line it prints one JSON object: the record type, the
 * value version, the key and the value as Kafka's JSON converters write them, and the key and value
 * serialised again by Kafka ("key_hex", "value_hex"), or {"error": ...} if Kafka cannot read them or
 * leaves bytes unread. With "embedded", each line is "NAME\tVALUE": a message of the consumer's
 * embedded protocol (ConsumerProtocolSubscription or ConsumerProtocolAssignment, kafka-clients) with
 * its int16 version, answered the same way (without a key).
 */
public class CoordinatorRecordsProbe {
    private static final HexFormat HEX = HexFormat.of();
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        boolean embedded = args[0].equals("embedded");
        for (String line : Files.readAllLines(Paths.get(args[embedded ? 1 : 0]))) {
            if (line.isEmpty()) continue;
            String[] parts = line.split("\t", -1);
            ObjectNode out = JSON.createObjectNode();
            try {
                if (embedded) {
                    decodeEmbedded(parts[0], parts[1], out);
                } else {
                    decode(parts[0], parts[1], out);
                }
            } catch (Exception e) {
                out.removeAll();
                out.put("error", e.toString());
            }
            System.out.println(JSON.writeValueAsString(out));
        }
    }

    private static void decodeEmbedded(String name, String valueHex, ObjectNode out) throws Exception {
        Class<?> cls = Class.forName("org.apache.kafka.common.message." + name);
        Class<?> converter = Class.forName("org.apache.kafka.common.message." + name + "JsonConverter");
        ByteBuffer value = ByteBuffer.wrap(HEX.parseHex(valueHex));
        short version = value.getShort();
        Message m = (Message) cls.getConstructor().newInstance();
        m.read(new ByteBufferAccessor(value), version);
        if (value.hasRemaining()) throw new IllegalStateException(value.remaining() + " value bytes left unread");
        out.put("version", version);
        out.set("value", (JsonNode) converter.getMethod("write", cls, short.class).invoke(null, m, version));
        out.put("value_hex", HEX.formatHex(MessageUtil.toVersionPrefixedBytes(version, m)));
    }

    private static void decode(String keyHex, String valueHex, ObjectNode out) {
        ByteBuffer key = ByteBuffer.wrap(HEX.parseHex(keyHex));
        short typeId = key.getShort();
        CoordinatorRecordType type = CoordinatorRecordType.fromId(typeId);
        ApiMessage k = type.newRecordKey();
        k.read(new ByteBufferAccessor(key), (short) 0);
        if (key.hasRemaining()) throw new IllegalStateException(key.remaining() + " key bytes left unread");
        out.put("type", typeId);
        out.set("key", CoordinatorRecordJsonConverters.writeRecordKeyAsJson(k));
        out.put("key_hex", HEX.formatHex(MessageUtil.toCoordinatorTypePrefixedBytes(k)));
        if (valueHex.equals("-")) {
            out.putNull("value");
            return;
        }
        ByteBuffer value = ByteBuffer.wrap(HEX.parseHex(valueHex));
        short version = value.getShort();
        ApiMessage v = type.newRecordValue();
        v.read(new ByteBufferAccessor(value), version);
        if (value.hasRemaining()) throw new IllegalStateException(value.remaining() + " value bytes left unread");
        out.put("version", version);
        out.set("value", CoordinatorRecordJsonConverters.writeRecordValueAsJson(v, version));
        out.put("value_hex", HEX.formatHex(MessageUtil.toVersionPrefixedBytes(version, v)));
    }
}
