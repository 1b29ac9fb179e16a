import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The Java Admin's ACL calls against a broker: {@code AclProbe <bootstrap> <command>...}, one JSON
 * line per command (tests/integration/test_acls.py).
 *
 * <ul>
 *   <li>{@code create TYPE NAME PATTERN PRINCIPAL HOST OPERATION PERMISSION}: createAcls of one binding
 *   <li>{@code describe}: describeAcls(AclBindingFilter.ANY): {"acls": [...]}
 *   <li>{@code delete TYPE NAME|- PATTERN}: deleteAcls of that pattern filter, any entry: {"deleted": [...]}
 * </ul>
 *
 * A failed call prints {"error": exception class, "message": ...}. PROBE_CLIENT_PROPERTIES may name
 * a properties file of client settings (security.protocol, sasl.*).
 */
public final class AclProbe {
    private AclProbe() {
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        String path = System.getenv("PROBE_CLIENT_PROPERTIES");
        if (path != null && !path.isEmpty()) {
            try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(path))) {
                props.load(r);
            }
        }
        try (Admin admin = Admin.create(props)) {
            for (int i = 1; i < args.length; i++) {
                JsonLines.print(run(admin, args[i].split(" ")));
            }
        }
    }

    private static Map<String, Object> run(Admin admin, String[] c) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("command", c[0]);
        try {
            switch (c[0]) {
                case "create": {
                    AclBinding b = new AclBinding(
                        new ResourcePattern(ResourceType.valueOf(c[1]), c[2], PatternType.valueOf(c[3])),
                        new AccessControlEntry(c[4], c[5], AclOperation.valueOf(c[6]), AclPermissionType.valueOf(c[7])));
                    admin.createAcls(Collections.singletonList(b)).all().get();
                    out.put("ok", true);
                    break;
                }
                case "describe":
                    out.put("acls", bindings(admin.describeAcls(AclBindingFilter.ANY).values().get()));
                    break;
                case "delete": {
                    AclBindingFilter f = new AclBindingFilter(
                        new ResourcePatternFilter(ResourceType.valueOf(c[1]), "-".equals(c[2]) ? null : c[2],
                            PatternType.valueOf(c[3])),
                        AccessControlEntryFilter.ANY);
                    out.put("deleted", bindings(admin.deleteAcls(Collections.singletonList(f)).all().get()));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown command " + c[0]);
            }
        } catch (ExecutionException e) {
            out.put("error", e.getCause().getClass().getSimpleName());
            out.put("message", String.valueOf(e.getCause().getMessage()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            out.put("error", "InterruptedException");
        }
        return out;
    }

    private static List<String> bindings(Collection<AclBinding> acls) {
        List<String> out = new ArrayList<>();
        for (AclBinding b : acls) {
            out.add(b.pattern().resourceType() + " " + b.pattern().name() + " " + b.pattern().patternType() + " "
                + b.entry().principal() + " " + b.entry().host() + " " + b.entry().operation() + " "
                + b.entry().permissionType());
        }
        Collections.sort(out);
        return out;
    }
}
