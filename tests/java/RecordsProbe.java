import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.TimestampType;

/**
 * Writes and reads v2 record batches with the Java client's own record classes, for the record codec
 * cross-checks in tests/log/test_records.py.
 *
 * <pre>
 *   java RecordsProbe write IN OUT CODEC... for each compression id CODEC, build one batch of the
 *                                          records in IN with MemoryRecordsBuilder; write the
 *                                          batches, one after another, to OUT
 *   java RecordsProbe read IN              check every batch in IN (ensureValid) and print one JSON
 *                                          line per record, then {"batches": N}
 * </pre>
 *
 * Record lines in IN are tab-separated: offset, timestamp, key, value, headers. Bytes are hex, "-" is
 * null; headers are "name=hex" (or "name=-") joined by ",", names being plain ASCII.
 */
public class RecordsProbe {
    private static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        if (args[0].equals("write")) {
            ByteBuffer all = ByteBuffer.allocate(1 << 24);
            for (int i = 3; i < args.length; i++) {
                all.put(write(Integer.parseInt(args[i]), args[1]));
            }
            Files.write(Paths.get(args[2]), java.util.Arrays.copyOf(all.array(), all.position()));
        } else {
            read(args[1]);
        }
    }

    private static byte[] bytes(String s) {
        return s.equals("-") ? null : HEX.parseHex(s);
    }

    private static String hex(ByteBuffer b) {
        if (b == null) return "null";
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return "\"" + HEX.formatHex(a) + "\"";
    }

    private static ByteBuffer write(int codec, String in) throws Exception {
        Compression compression = Compression.of(CompressionType.forId(codec)).build();
        ByteBuffer buffer = ByteBuffer.allocate(1 << 22);
        MemoryRecordsBuilder builder =
            MemoryRecords.builder(buffer, compression, TimestampType.CREATE_TIME, 0L);
        for (String line : Files.readAllLines(Paths.get(in), StandardCharsets.UTF_8)) {
            if (line.isEmpty()) continue;
            String[] f = line.split("\t", -1);
            List<Header> headers = new ArrayList<>();
            if (!f[4].isEmpty()) {
                for (String h : f[4].split(",")) {
                    int eq = h.indexOf('=');
                    headers.add(new RecordHeader(h.substring(0, eq), bytes(h.substring(eq + 1))));
                }
            }
            builder.appendWithOffset(Long.parseLong(f[0]), Long.parseLong(f[1]), bytes(f[2]), bytes(f[3]),
                headers.toArray(new Header[0]));
        }
        return builder.build().buffer();
    }

    private static void read(String in) throws Exception {
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Paths.get(in))));
        int batches = 0;
        StringBuilder out = new StringBuilder();
        for (MutableRecordBatch batch : records.batches()) {
            batch.ensureValid();
            batches++;
            for (Record r : batch) {
                r.ensureValid();
                out.append("{\"offset\":").append(r.offset()).append(",\"timestamp\":").append(r.timestamp())
                    .append(",\"key\":").append(hex(r.key())).append(",\"value\":").append(hex(r.value()))
                    .append(",\"headers\":[");
                Header[] hs = r.headers();
                for (int i = 0; i < hs.length; i++) {
                    if (i > 0) out.append(',');
                    out.append("[\"").append(hs[i].key()).append("\",")
                        .append(hs[i].value() == null ? "null" : hex(ByteBuffer.wrap(hs[i].value()))).append(']');
                }
                out.append("],\"compression\":").append(batch.compressionType().id).append("}\n");
            }
        }
        out.append("{\"batches\":").append(batches).append("}\n");
        System.out.print(out);
    }
}
