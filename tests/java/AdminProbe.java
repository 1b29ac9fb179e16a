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
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DeleteConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.AlterConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.ConsumerGroupDescribeRequestData;
import org.apache.kafka.common.message.ConsumerGroupDescribeResponseData;
import org.apache.kafka.common.message.FindCoordinatorRequestData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.ApiVersionsRequest;
import org.apache.kafka.common.requests.ApiVersionsResponse;
import org.apache.kafka.common.requests.ConsumerGroupDescribeRequest;
import org.apache.kafka.common.requests.ConsumerGroupDescribeResponse;
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
 *   create NAME N [k=v ...]      createTopics (N partitions, -1 for the default; replication
 *                                factor left to the broker): topicId, partitions, replication
 *                                factor and the configs the broker reports
 *   create-dry NAME N [k=v ...]  the same with validateOnly
 *   delete NAME[,NAME...]        deleteTopics by name
 *   delete-id ID                 deleteTopics by topic id (TopicCollection.ofTopicIds)
 *   partitions NAME N            createPartitions (increaseTo N)
 *   configs NAME                 describeConfigs of topic NAME (synonyms and documentation on):
 *                                every entry's value, source, type, readOnly, synonyms
 *   broker-configs ID            describeConfigs of broker ID (values and sources)
 *   alter NAME EDIT...           incrementalAlterConfigs of topic NAME; EDIT is k=v (SET),
 *                                k+=v (APPEND), k-=v (SUBTRACT) or -k (DELETE)
 *   alter-dry NAME EDIT...       the same with validateOnly
 *   list-offsets T:P SPEC        listOffsets of partition P of topic T; SPEC is earliest, latest,
 *                                max-timestamp, earliest-local, latest-tiered or a timestamp:
 *                                offset, timestamp and leaderEpoch (null when absent)
 *   list-groups                  listConsumerGroups: "groups", each groupId, simple, state, type,
 *                                sorted by groupId
 *   describe-groups G1,G2        describeConsumerGroups: "groups" by id, each either the description
 *                                (state, simple, assignor, type, coordinator id, members with
 *                                memberId, instanceId, clientId, host and assignment as "topic-p")
 *                                or {"error": exception class}
 *   delete-groups G1,G2          deleteConsumerGroups: "results" by id, null or the exception class
 *   consumer-group-describe G1,G2
 *                                ConsumerGroupDescribe (KIP-848) at the newest version both sides
 *                                support, over a plain socket with the client's own request and
 *                                response classes (Admin 3.9 does not expose epochs): "version" and
 *                                "groups" by id, each error (name), errorMessage, state, groupEpoch,
 *                                assignmentEpoch, assignor and members (sorted by memberId) with
 *                                memberId, instanceId, memberEpoch, clientId, clientHost,
 *                                subscribedTopicNames, assignment and targetAssignment as "topic-p"
 *   group-offsets G              listConsumerGroupOffsets: "offsets" {"topic-p": offset}
 *   delete-group-offsets G T:P,...
 *                                deleteConsumerGroupOffsets: "partitions" {"topic-p": null or the
 *                                exception class}, "all": null or the exception class of all()
 *   alter-group-offsets G T:P=OFFSET,...
 *                                alterConsumerGroupOffsets: the same shape as delete-group-offsets
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
                case "describe-topics-paged":
                    describeTopicsPaged(out, arg(words, 1), Integer.parseInt(arg(words, 2)));
                    break;
                case "coordinator":
                    coordinator(out, arg(words, 1));
                    break;
                case "create":
                case "create-dry":
                    create(out, arg(words, 1), Integer.parseInt(arg(words, 2)),
                            Arrays.copyOfRange(words, 3, words.length), cmd.equals("create-dry"));
                    break;
                case "delete":
                    admin.deleteTopics(Arrays.asList(arg(words, 1).split(","))).all().get();
                    break;
                case "delete-id":
                    admin.deleteTopics(TopicCollection.ofTopicIds(List.of(Uuid.fromString(arg(words, 1)))))
                            .all().get();
                    break;
                case "partitions":
                    partitions(out, arg(words, 1), Integer.parseInt(arg(words, 2)));
                    break;
                case "configs":
                    configs(out, new ConfigResource(ConfigResource.Type.TOPIC, arg(words, 1)));
                    break;
                case "broker-configs":
                    configs(out, new ConfigResource(ConfigResource.Type.BROKER, arg(words, 1)));
                    break;
                case "alter":
                case "alter-dry":
                    arg(words, 2);
                    alter(arg(words, 1), Arrays.copyOfRange(words, 2, words.length), cmd.equals("alter-dry"));
                    break;
                case "list-offsets":
                    listOffsets(out, arg(words, 1), arg(words, 2));
                    break;
                case "delete-records":
                    deleteRecords(out, arg(words, 1), Long.parseLong(arg(words, 2)));
                    break;
                case "client-metrics-resources":
                    out.put("names", admin.listClientMetricsResources().all().get().size());
                    break;
                case "features":
                    features(out);
                    break;
                case "update-feature":
                    admin.updateFeatures(Map.of(arg(words, 1), new FeatureUpdate(Short.parseShort(arg(words, 2)),
                            FeatureUpdate.UpgradeType.valueOf(arg(words, 3)))),
                            new org.apache.kafka.clients.admin.UpdateFeaturesOptions()).all().get();
                    break;
                case "quorum":
                    quorum(out);
                    break;
                case "elect":
                    elect(out, arg(words, 1), arg(words, 2));
                    break;
                case "reassign":
                    reassign(arg(words, 1), arg(words, 2));
                    break;
                case "list-reassignments":
                    listReassignments(out);
                    break;
                case "log-dirs":
                    logDirs(out);
                    break;
                case "alter-log-dir":
                    alterLogDir(out, arg(words, 1), arg(words, 2));
                    break;
                case "list-groups":
                    listGroups(out);
                    break;
                case "describe-groups":
                    describeGroups(out, arg(words, 1));
                    break;
                case "delete-groups":
                    deleteGroups(out, arg(words, 1));
                    break;
                case "consumer-group-describe":
                    consumerGroupDescribe(out, arg(words, 1));
                    break;
                case "group-offsets":
                    groupOffsets(out, arg(words, 1));
                    break;
                case "delete-group-offsets":
                    deleteGroupOffsets(out, arg(words, 1), arg(words, 2));
                    break;
                case "alter-group-offsets":
                    alterGroupOffsets(out, arg(words, 1), arg(words, 2));
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

    /** describeTopics with a partition limit per response (DescribeTopicPartitions pages, KIP-966). */
    private void describeTopicsPaged(Map<String, Object> out, String names, int limit) throws Exception {
        DescribeTopicsOptions options = new DescribeTopicsOptions()
                .partitionSizeLimitPerResponse(limit).includeAuthorizedOperations(true);
        Map<String, TopicDescription> all =
                admin.describeTopics(Arrays.asList(names.split(",")), options).allTopicNames().get();
        List<Object> topics = new ArrayList<>();
        for (TopicDescription d : new TreeMap<>(all).values()) {
            Map<String, Object> t = new LinkedHashMap<>();
            t.put("name", d.name());
            t.put("internal", d.isInternal());
            t.put("operations", d.authorizedOperations() == null ? null
                    : d.authorizedOperations().stream().map(Object::toString).sorted()
                        .collect(java.util.stream.Collectors.toList()));
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo p : d.partitions()) {
                Map<String, Object> pm = new LinkedHashMap<>();
                pm.put("partition", p.partition());
                pm.put("leader", p.leader() == null ? null : p.leader().id());
                pm.put("replicas", ids(p.replicas()));
                pm.put("isr", ids(p.isr()));
                pm.put("elr", p.elr() == null ? null : ids(p.elr()));
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

            ApiVersionsResponse av = apiVersions(os, is);
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

    private void create(Map<String, Object> out, String name, int partitions, String[] configs, boolean dry)
            throws Exception {
        Map<String, String> cfg = new LinkedHashMap<>();
        for (String kv : configs) {
            String[] p = kv.split("=", 2);
            cfg.put(p[0], p[1]);
        }
        NewTopic topic = new NewTopic(name, partitions == -1 ? Optional.empty() : Optional.of(partitions),
                Optional.empty()).configs(cfg);
        CreateTopicsResult r = admin.createTopics(List.of(topic), new CreateTopicsOptions().validateOnly(dry));
        r.all().get();
        Uuid id = r.topicId(name).get();
        out.put("topicId", id == null ? null : id.toString());
        out.put("partitions", r.numPartitions(name).get());
        out.put("replicationFactor", (int) r.replicationFactor(name).get());
        Map<String, Object> reported = new TreeMap<>();
        for (ConfigEntry e : r.config(name).get().entries()) {
            reported.put(e.name(), List.of(String.valueOf(e.value()), e.source().name()));
        }
        out.put("configs", reported);
    }

    private void partitions(Map<String, Object> out, String name, int count) throws Exception {
        admin.createPartitions(Map.of(name, NewPartitions.increaseTo(count)), new CreatePartitionsOptions())
                .all().get();
    }

    private void configs(Map<String, Object> out, ConfigResource resource) throws Exception {
        Map<ConfigResource, Config> all = admin.describeConfigs(List.of(resource),
                new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get();
        Map<String, Object> entries = new TreeMap<>();
        for (ConfigEntry e : all.get(resource).entries()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("value", e.value());
            m.put("source", e.source().name());
            m.put("type", e.type().name());
            m.put("readOnly", e.isReadOnly());
            m.put("sensitive", e.isSensitive());
            m.put("documentation", e.documentation());
            List<Object> synonyms = new ArrayList<>();
            for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                synonyms.add(List.of(s.name(), String.valueOf(s.value()), s.source().name()));
            }
            m.put("synonyms", synonyms);
            entries.put(e.name(), m);
        }
        out.put("entries", entries);
    }

    private void alter(String name, String[] edits, boolean dry) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String edit : edits) {
            if (edit.startsWith("-")) {
                ops.add(new AlterConfigOp(new ConfigEntry(edit.substring(1), null), AlterConfigOp.OpType.DELETE));
            } else if (edit.contains("+=")) {
                String[] p = edit.split("\\+=", 2);
                ops.add(new AlterConfigOp(new ConfigEntry(p[0], p[1]), AlterConfigOp.OpType.APPEND));
            } else if (edit.contains("-=")) {
                String[] p = edit.split("-=", 2);
                ops.add(new AlterConfigOp(new ConfigEntry(p[0], p[1]), AlterConfigOp.OpType.SUBTRACT));
            } else {
                String[] p = edit.split("=", 2);
                ops.add(new AlterConfigOp(new ConfigEntry(p[0], p[1]), AlterConfigOp.OpType.SET));
            }
        }
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, name);
        admin.incrementalAlterConfigs(Map.of(resource, ops), new AlterConfigsOptions().validateOnly(dry)).all().get();
    }

    private void listOffsets(Map<String, Object> out, String partition, String spec) throws Exception {
        int colon = partition.lastIndexOf(':');
        TopicPartition tp = new TopicPartition(partition.substring(0, colon),
                Integer.parseInt(partition.substring(colon + 1)));
        OffsetSpec offsetSpec;
        switch (spec) {
            case "earliest": offsetSpec = OffsetSpec.earliest(); break;
            case "latest": offsetSpec = OffsetSpec.latest(); break;
            case "max-timestamp": offsetSpec = OffsetSpec.maxTimestamp(); break;
            case "earliest-local": offsetSpec = OffsetSpec.earliestLocal(); break;
            case "latest-tiered": offsetSpec = OffsetSpec.latestTiered(); break;
            default: offsetSpec = OffsetSpec.forTimestamp(Long.parseLong(spec));
        }
        ListOffsetsResult.ListOffsetsResultInfo info =
                admin.listOffsets(Map.of(tp, offsetSpec)).partitionResult(tp).get();
        out.put("offset", info.offset());
        out.put("timestamp", info.timestamp());
        out.put("leaderEpoch", info.leaderEpoch().orElse(null));
    }

    private void deleteRecords(Map<String, Object> out, String partition, long offset) throws Exception {
        int colon = partition.lastIndexOf(':');
        TopicPartition tp = new TopicPartition(partition.substring(0, colon),
                Integer.parseInt(partition.substring(colon + 1)));
        out.put("lowWatermark", admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(offset)))
                .lowWatermarks().get(tp).get().lowWatermark());
    }

    private static TopicPartition tp(String s) {
        int colon = s.lastIndexOf(':');
        return new TopicPartition(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)));
    }

    /** describeFeatures: supported ranges, finalized levels and their epoch. */
    private void features(Map<String, Object> out) throws Exception {
        FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
        Map<String, Object> supported = new TreeMap<>();
        f.supportedFeatures().forEach((k, v) -> supported.put(k, List.of((int) v.minVersion(), (int) v.maxVersion())));
        Map<String, Object> finalized = new TreeMap<>();
        f.finalizedFeatures().forEach((k, v) -> finalized.put(k, (int) v.maxVersionLevel()));
        out.put("supported", supported);
        out.put("finalized", finalized);
        out.put("epoch", f.finalizedFeaturesEpoch().orElse(null));
    }

    /** describeMetadataQuorum: leader, epoch, voters and observers. */
    private void quorum(Map<String, Object> out) throws Exception {
        QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
        out.put("leaderId", q.leaderId());
        out.put("leaderEpoch", q.leaderEpoch());
        out.put("highWatermark", q.highWatermark());
        List<Object> voters = new ArrayList<>();
        for (QuorumInfo.ReplicaState r : q.voters()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("replicaId", r.replicaId());
            m.put("logEndOffset", r.logEndOffset());
            m.put("lastFetchTimestamp", r.lastFetchTimestamp().isPresent() ? r.lastFetchTimestamp().getAsLong() : null);
            voters.add(m);
        }
        out.put("voters", voters);
        out.put("observers", q.observers().size());
    }

    /** electLeaders(PREFERRED|UNCLEAN, topic:p,...): per partition the exception class, or null. */
    private void elect(Map<String, Object> out, String type, String partitions) throws Exception {
        Set<TopicPartition> tps = new java.util.HashSet<>();
        for (String p : partitions.split(",")) {
            tps.add(tp(p));
        }
        Map<TopicPartition, Optional<Throwable>> result =
                admin.electLeaders(ElectionType.valueOf(type), tps).partitions().get();
        Map<String, Object> byPartition = new TreeMap<>();
        for (Map.Entry<TopicPartition, Optional<Throwable>> e : result.entrySet()) {
            byPartition.put(e.getKey().toString(), e.getValue().map(t -> t.getClass().getName()).orElse(null));
        }
        out.put("results", byPartition);
    }

    /** alterPartitionReassignments for one partition: replicas "1,2" or "cancel". */
    private void reassign(String partition, String replicas) throws Exception {
        Optional<NewPartitionReassignment> target = replicas.equals("cancel") ? Optional.empty()
                : Optional.of(new NewPartitionReassignment(Arrays.stream(replicas.split(","))
                        .map(Integer::valueOf).collect(java.util.stream.Collectors.toList())));
        admin.alterPartitionReassignments(Map.of(tp(partition), target)).all().get();
    }

    private void listReassignments(Map<String, Object> out) throws Exception {
        Map<TopicPartition, PartitionReassignment> all = admin.listPartitionReassignments().reassignments().get();
        out.put("reassignments", all.size());
    }

    /** describeLogDirs on node 1: every directory with its volume sizes and replicas. */
    private void logDirs(Map<String, Object> out) throws Exception {
        Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(1)).allDescriptions().get().get(1);
        List<Object> list = new ArrayList<>();
        for (Map.Entry<String, LogDirDescription> e : new TreeMap<>(dirs).entrySet()) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("path", e.getKey());
            d.put("error", e.getValue().error() == null ? null : e.getValue().error().getClass().getName());
            d.put("totalBytes", e.getValue().totalBytes().isPresent() ? e.getValue().totalBytes().getAsLong() : null);
            d.put("usableBytes", e.getValue().usableBytes().isPresent() ? e.getValue().usableBytes().getAsLong() : null);
            Map<String, Object> replicas = new TreeMap<>();
            for (Map.Entry<TopicPartition, ReplicaInfo> r : e.getValue().replicaInfos().entrySet()) {
                Map<String, Object> info = new LinkedHashMap<>();
                info.put("size", r.getValue().size());
                info.put("offsetLag", r.getValue().offsetLag());
                info.put("future", r.getValue().isFuture());
                replicas.put(r.getKey().toString(), info);
            }
            d.put("replicas", replicas);
            list.add(d);
        }
        out.put("dirs", list);
    }

    /** alterReplicaLogDirs for one replica on node 1 (topic:partition, destination path). */
    private void alterLogDir(Map<String, Object> out, String partition, String path) throws Exception {
        int colon = partition.lastIndexOf(':');
        TopicPartitionReplica r = new TopicPartitionReplica(partition.substring(0, colon),
                Integer.parseInt(partition.substring(colon + 1)), 1);
        admin.alterReplicaLogDirs(Map.of(r, path)).all().get();
    }

    // ------------------------------------------------------------------------------------ groups

    private void listGroups(Map<String, Object> out) throws Exception {
        TreeMap<String, Object> byId = new TreeMap<>();
        for (ConsumerGroupListing l : admin.listConsumerGroups().all().get()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("groupId", l.groupId());
            m.put("simple", l.isSimpleConsumerGroup());
            m.put("state", l.state().map(Object::toString).orElse(null));
            m.put("type", l.type().map(Object::toString).orElse(null));
            byId.put(l.groupId(), m);
        }
        out.put("groups", new ArrayList<>(byId.values()));
    }

    private void describeGroups(Map<String, Object> out, String ids) throws Exception {
        Map<String, KafkaFuture<ConsumerGroupDescription>> futures =
                admin.describeConsumerGroups(Arrays.asList(ids.split(","))).describedGroups();
        Map<String, Object> groups = new TreeMap<>();
        for (Map.Entry<String, KafkaFuture<ConsumerGroupDescription>> e : futures.entrySet()) {
            Map<String, Object> g = new LinkedHashMap<>();
            try {
                ConsumerGroupDescription d = e.getValue().get();
                g.put("groupId", d.groupId());
                g.put("state", String.valueOf(d.state()));
                g.put("simple", d.isSimpleConsumerGroup());
                g.put("assignor", d.partitionAssignor());
                g.put("type", String.valueOf(d.type()));
                g.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
                TreeMap<String, Object> members = new TreeMap<>();
                for (MemberDescription md : d.members()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("memberId", md.consumerId());
                    m.put("instanceId", md.groupInstanceId().orElse(null));
                    m.put("clientId", md.clientId());
                    m.put("host", md.host());
                    m.put("assignment", partitionNames(md.assignment().topicPartitions()));
                    if (md.targetAssignment().isPresent()) { // only from ConsumerGroupDescribe
                        m.put("targetAssignment", partitionNames(md.targetAssignment().get().topicPartitions()));
                    }
                    members.put(md.consumerId(), m);
                }
                g.put("members", new ArrayList<>(members.values()));
            } catch (ExecutionException ex) {
                g.put("error", ex.getCause().getClass().getName());
            }
            groups.put(e.getKey(), g);
        }
        out.put("groups", groups);
    }

    /** ConsumerGroupDescribe sent directly to the (single) broker, which is every group's coordinator. */
    private void consumerGroupDescribe(Map<String, Object> out, String ids) throws Exception {
        String[] hp = bootstrap.split(",")[0].split(":");
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), 10000);
            s.setSoTimeout(10000);
            DataOutputStream os = new DataOutputStream(s.getOutputStream());
            DataInputStream is = new DataInputStream(s.getInputStream());
            ApiVersionsResponse av = apiVersions(os, is);
            ApiVersionsResponseData.ApiVersion cgd = av.apiVersion(ApiKeys.CONSUMER_GROUP_DESCRIBE.id);
            if (cgd == null) {
                throw new IllegalStateException("broker does not advertise ConsumerGroupDescribe");
            }
            short v = (short) Math.min(cgd.maxVersion(), ApiKeys.CONSUMER_GROUP_DESCRIBE.latestVersion(true));
            ConsumerGroupDescribeRequestData data = new ConsumerGroupDescribeRequestData()
                    .setGroupIds(new ArrayList<>(Arrays.asList(ids.split(","))));
            ConsumerGroupDescribeResponse r = (ConsumerGroupDescribeResponse) roundTrip(
                    os, is, new ConsumerGroupDescribeRequest.Builder(data, true).build(v), "admin-probe");
            Map<String, Object> groups = new TreeMap<>();
            for (ConsumerGroupDescribeResponseData.DescribedGroup g : r.data().groups()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("error", Errors.forCode(g.errorCode()).name());
                m.put("errorMessage", g.errorMessage());
                m.put("state", g.groupState());
                m.put("groupEpoch", g.groupEpoch());
                m.put("assignmentEpoch", g.assignmentEpoch());
                m.put("assignor", g.assignorName());
                TreeMap<String, Object> members = new TreeMap<>();
                for (ConsumerGroupDescribeResponseData.Member md : g.members()) {
                    Map<String, Object> mm = new LinkedHashMap<>();
                    mm.put("memberId", md.memberId());
                    mm.put("instanceId", md.instanceId());
                    mm.put("memberEpoch", md.memberEpoch());
                    mm.put("clientId", md.clientId());
                    mm.put("clientHost", md.clientHost());
                    mm.put("subscribedTopicNames", md.subscribedTopicNames());
                    mm.put("assignment", describedPartitions(md.assignment()));
                    mm.put("targetAssignment", describedPartitions(md.targetAssignment()));
                    members.put(md.memberId(), mm);
                }
                m.put("members", new ArrayList<>(members.values()));
                groups.put(g.groupId(), m);
            }
            out.put("version", (int) v);
            out.put("groups", groups);
        }
    }

    private static List<Object> describedPartitions(ConsumerGroupDescribeResponseData.Assignment a) {
        List<TopicPartition> tps = new ArrayList<>();
        for (ConsumerGroupDescribeResponseData.TopicPartitions t : a.topicPartitions()) {
            for (int p : t.partitions()) {
                tps.add(new TopicPartition(t.topicName(), p));
            }
        }
        return partitionNames(tps);
    }

    private void deleteGroups(Map<String, Object> out, String ids) throws Exception {
        Map<String, KafkaFuture<Void>> futures =
                admin.deleteConsumerGroups(Arrays.asList(ids.split(","))).deletedGroups();
        Map<String, Object> results = new TreeMap<>();
        for (Map.Entry<String, KafkaFuture<Void>> e : futures.entrySet()) {
            results.put(e.getKey(), outcome(e.getValue()));
        }
        out.put("results", results);
    }

    private void groupOffsets(Map<String, Object> out, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Map<String, Object> m = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            m.put(e.getKey().toString(), e.getValue() == null ? null : e.getValue().offset());
        }
        out.put("offsets", m);
    }

    private void deleteGroupOffsets(Map<String, Object> out, String group, String spec) throws Exception {
        Set<TopicPartition> tps = new java.util.LinkedHashSet<>();
        for (String tp : spec.split(",")) {
            tps.add(topicPartition(tp));
        }
        DeleteConsumerGroupOffsetsResult r = admin.deleteConsumerGroupOffsets(group, tps);
        Map<String, Object> parts = new TreeMap<>();
        for (TopicPartition tp : tps) {
            parts.put(tp.toString(), outcome(r.partitionResult(tp)));
        }
        out.put("partitions", parts);
        out.put("all", outcome(r.all()));
    }

    private void alterGroupOffsets(Map<String, Object> out, String group, String spec) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (String item : spec.split(",")) {
            String[] kv = item.split("=", 2);
            offsets.put(topicPartition(kv[0]), new OffsetAndMetadata(Long.parseLong(kv[1])));
        }
        AlterConsumerGroupOffsetsResult r = admin.alterConsumerGroupOffsets(group, offsets);
        Map<String, Object> parts = new TreeMap<>();
        for (TopicPartition tp : offsets.keySet()) {
            parts.put(tp.toString(), outcome(r.partitionResult(tp)));
        }
        out.put("partitions", parts);
        out.put("all", outcome(r.all()));
    }

    /** null when the future succeeded, else the class of its exception. */
    private static String outcome(KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause().getClass().getName();
        }
    }

    private static TopicPartition topicPartition(String spec) {
        int i = spec.lastIndexOf(':');
        return new TopicPartition(spec.substring(0, i), Integer.parseInt(spec.substring(i + 1)));
    }

    private static List<Object> partitionNames(Collection<TopicPartition> tps) {
        TreeMap<String, Object> sorted = new TreeMap<>();
        for (TopicPartition tp : tps) {
            sorted.put(String.format("%s-%05d", tp.topic(), tp.partition()), tp.toString());
        }
        return new ArrayList<>(sorted.values());
    }

    /**
     * ApiVersions as the client's NetworkClient negotiates it: the client's newest version first; on
     * UNSUPPORTED_VERSION, again at the newest version the broker's (v0-format) answer lists.
     */
    private ApiVersionsResponse apiVersions(DataOutputStream os, DataInputStream is) throws Exception {
        short version = ApiKeys.API_VERSIONS.latestVersion();
        ApiVersionsResponse av = (ApiVersionsResponse) roundTrip(
                os, is, new ApiVersionsRequest.Builder().build(version), "admin-probe");
        if (av.data().errorCode() == Errors.UNSUPPORTED_VERSION.code()) {
            ApiVersionsResponseData.ApiVersion own = av.apiVersion(ApiKeys.API_VERSIONS.id);
            if (own == null) {
                throw Errors.UNSUPPORTED_VERSION.exception("ApiVersions v" + version + ": no ranges in the answer");
            }
            version = (short) Math.min(version, own.maxVersion());
            av = (ApiVersionsResponse) roundTrip(os, is, new ApiVersionsRequest.Builder().build(version), "admin-probe");
        }
        if (av.data().errorCode() != Errors.NONE.code()) {
            throw Errors.forCode(av.data().errorCode()).exception("ApiVersions v" + version);
        }
        return av;
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
        JsonLines.print(m);
    }
}
