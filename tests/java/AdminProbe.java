import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.FindCoordinatorRequestData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.ApiVersionsRequest;
import org.apache.kafka.common.requests.ApiVersionsResponse;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.RequestHeader;

/**
 * Drives org.apache.kafka.clients.admin.Admin against a broker and prints one JSON object per command
 * on stdout, one line each.
 *
 * <pre>
 *   java AdminProbe BOOTSTRAP COMMAND...     run the commands given as arguments
 *   java AdminProbe BOOTSTRAP                read commands from stdin, one per line, until EOF
 * </pre>
 *
 * Commands (arguments separated by spaces; on the command line a command with arguments is one
 * argument, e.g. "describe-topics t1,t2"):
 *
 * <pre>
 *   cluster                      describeCluster: clusterId, controller, nodes
 *   topics                       listTopics (listInternal true): names and listings
 *   describe-topics T1,T2        describeTopics (allTopicNames): name, topicId, internal, partitions
 *   coordinator GROUP            FindCoordinator (key type GROUP) at every version both the broker
 *                                and this client support, serialized and parsed by the client's
 *                                own request/response classes over a plain socket (Admin has no
 *                                find-coordinator call)
 * </pre>
 *
 * A failed command prints {"cmd":..., "error": exception class, "message": ...} on stdout and the
 * stack trace on stderr, and the remaining commands still run; the exit code is then 1. Bad usage
 * exits 2.
 */
public class AdminProbe {
    private final String bootstrap;
    private final Admin admin;
    private int correlationId = 1;

    AdminProbe(String bootstrap) {
        this.bootstrap = bootstrap;
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "admin-probe");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: AdminProbe BOOTSTRAP [COMMAND...]");
            System.exit(2);
        }
        boolean failed = false;
        AdminProbe probe = new AdminProbe(args[0]);
        try {
            if (args.length > 1) {
                for (int i = 1; i < args.length; i++) {
                    failed |= !probe.run(args[i]);
                }
            } else {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line;
                while ((line = in.readLine()) != null) {
                    if (!line.isBlank()) {
                        failed |= !probe.run(line);
                    }
                }
            }
        } finally {
            probe.admin.close(java.time.Duration.ofSeconds(5));
        }
        System.out.flush();
        System.exit(failed ? 1 : 0);
    }

    /** Run one command line; print its result line. False if it failed. */
    boolean run(String line) {
        String[] words = line.trim().split("\\s+");
        String cmd = words[0];
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("cmd", cmd);
        try {
            switch (cmd) {
                case "cluster":
                    cluster(out);
                    break;
                case "topics":
                    topics(out);
                    break;
                case "describe-topics":
                    describeTopics(out, arg(words, 1));
                    break;
                case "coordinator":
                    coordinator(out, arg(words, 1));
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + cmd);
            }
            emit(out);
            return true;
        } catch (Throwable t) {
            Throwable cause = t;
            while (cause instanceof ExecutionException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            out.put("error", cause.getClass().getName());
            out.put("message", cause.getMessage());
            emit(out);
            StringWriter sw = new StringWriter();
            cause.printStackTrace(new PrintWriter(sw));
            System.err.println("command '" + line.trim() + "' failed: " + sw);
            System.err.flush();
            return false;
        }
    }

    private static String arg(String[] words, int i) {
        if (words.length <= i) {
            throw new IllegalArgumentException(words[0] + ": missing argument " + i);
        }
        return words[i];
    }

    // ------------------------------------------------------------------------------------ commands

    private void cluster(Map<String, Object> out) throws Exception {
        DescribeClusterResult r = admin.describeCluster();
        out.put("clusterId", r.clusterId().get());
        out.put("controller", node(r.controller().get()));
        List<Object> nodes = new ArrayList<>();
        for (Node n : r.nodes().get()) {
            nodes.add(node(n));
        }
        out.put("nodes", nodes);
    }

    private void topics(Map<String, Object> out) throws Exception {
        Collection<TopicListing> listings =
                admin.listTopics(new ListTopicsOptions().listInternal(true)).listings().get();
        TreeMap<String, Object> byName = new TreeMap<>();
        for (TopicListing l : listings) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", l.name());
            m.put("topicId", l.topicId() == null ? null : l.topicId().toString());
            m.put("internal", l.isInternal());
            byName.put(l.name(), m);
        }
        out.put("names", new ArrayList<>(byName.keySet()));
        out.put("listings", new ArrayList<>(byName.values()));
    }

    private void describeTopics(Map<String, Object> out, String names) throws Exception {
        Map<String, TopicDescription> all =
                admin.describeTopics(Arrays.asList(names.split(","))).allTopicNames().get();
        List<Object> topics = new ArrayList<>();
        for (TopicDescription d : new TreeMap<>(all).values()) {
            Map<String, Object> t = new LinkedHashMap<>();
            t.put("name", d.name());
            t.put("topicId", d.topicId() == null ? null : d.topicId().toString());
            t.put("internal", d.isInternal());
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo p : d.partitions()) {
                Map<String, Object> pm = new LinkedHashMap<>();
                pm.put("partition", p.partition());
                pm.put("leader", p.leader() == null ? null : p.leader().id());
                pm.put("replicas", ids(p.replicas()));
                pm.put("isr", ids(p.isr()));
                parts.add(pm);
            }
            t.put("partitions", parts);
            topics.add(t);
        }
        out.put("topics", topics);
    }

    /** FindCoordinator(GROUP, group) at every version both sides support, one entry per version. */
    private void coordinator(Map<String, Object> out, String group) throws Exception {
        String[] hp = bootstrap.split(",")[0].split(":");
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), 10000);
            s.setSoTimeout(10000);
            DataOutputStream os = new DataOutputStream(s.getOutputStream());
            DataInputStream is = new DataInputStream(s.getInputStream());

            short avVersion = ApiKeys.API_VERSIONS.latestVersion();
            ApiVersionsResponse av = (ApiVersionsResponse) roundTrip(
                    os, is, new ApiVersionsRequest.Builder().build(avVersion), "admin-probe");
            if (av.data().errorCode() != Errors.NONE.code()) {
                throw Errors.forCode(av.data().errorCode()).exception("ApiVersions v" + avVersion);
            }
            ApiVersionsResponseData.ApiVersion fc = av.apiVersion(ApiKeys.FIND_COORDINATOR.id);
            if (fc == null) {
                throw new IllegalStateException("broker does not advertise FindCoordinator");
            }
            short lo = (short) Math.max(fc.minVersion(), ApiKeys.FIND_COORDINATOR.oldestVersion());
            short hi = (short) Math.min(fc.maxVersion(), ApiKeys.FIND_COORDINATOR.latestVersion());
            List<Object> versions = new ArrayList<>();
            for (short v = lo; v <= hi; v++) {
                FindCoordinatorRequestData data = new FindCoordinatorRequestData()
                        .setKeyType(FindCoordinatorRequest.CoordinatorType.GROUP.id())
                        .setCoordinatorKeys(new ArrayList<>(List.of(group)));
                FindCoordinatorResponse r = (FindCoordinatorResponse) roundTrip(
                        os, is, new FindCoordinatorRequest.Builder(data).build(v), "admin-probe");
                for (FindCoordinatorResponseData.Coordinator c : r.coordinators()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("version", (int) v);
                    m.put("key", c.key());
                    m.put("error", Errors.forCode(c.errorCode()).name());
                    m.put("nodeId", c.nodeId());
                    m.put("host", c.host());
                    m.put("port", c.port());
                    versions.add(m);
                }
            }
            out.put("versions", versions);
        }
    }

    private AbstractResponse roundTrip(DataOutputStream os, DataInputStream is, AbstractRequest req, String clientId)
            throws Exception {
        RequestHeader header = new RequestHeader(req.apiKey(), req.version(), clientId, correlationId++);
        ByteBuffer buf = req.serializeWithHeader(header);
        os.writeInt(buf.remaining());
        os.write(buf.array(), buf.arrayOffset() + buf.position(), buf.remaining());
        os.flush();
        int size = is.readInt();
        byte[] body = new byte[size];
        is.readFully(body);
        // Parses the response header too and checks the correlation id.
        return AbstractResponse.parseResponse(ByteBuffer.wrap(body), header);
    }

    // ------------------------------------------------------------------------------------ output

    private static Map<String, Object> node(Node n) {
        if (n == null) {
            return null;
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", n.id());
        m.put("host", n.host());
        m.put("port", n.port());
        m.put("rack", n.rack());
        return m;
    }

    private static List<Object> ids(List<Node> nodes) {
        List<Object> out = new ArrayList<>();
        for (Node n : nodes) {
            out.add(n.id());
        }
        return out;
    }

    private static void emit(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder();
        json(sb, m);
        System.out.println(sb);
        System.out.flush();
    }

    private static void json(StringBuilder sb, Object o) {
        if (o == null) {
            sb.append("null");
        } else if (o instanceof String) {
            sb.append('"');
            for (char c : ((String) o).toCharArray()) {
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                }
            }
            sb.append('"');
        } else if (o instanceof Number || o instanceof Boolean) {
            sb.append(o);
        } else if (o instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                json(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (o instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object x : (Collection<?>) o) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                json(sb, x);
            }
            sb.append(']');
        } else {
            json(sb, o.toString());
        }
    }
}
