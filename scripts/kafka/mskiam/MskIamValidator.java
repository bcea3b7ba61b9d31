package org.kafkatrail.mskiam;

import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerExtensionsValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;

/**
 * The test broker's stand-in for Amazon MSK's IAM check of an OAUTHBEARER token: the token is
 * a base64url SigV4-presigned URL of GET https://kafka.REGION.amazonaws.com/?Action=kafka-cluster:Connect
 * (what AWS's MSK IAM signers make). It is accepted when its signature is the one SigV4 gives
 * with the secret key of its access key (the listener's JAAS options accessKeyId and
 * secretAccessKey), for the service kafka-cluster, and it has not expired (X-Amz-Date plus
 * X-Amz-Expires); the principal is the access key. User-Agent, added after signing, is not
 * signed. Anything else is refused with invalid_token (the reason goes to the broker's log).
 */
public class MskIamValidator implements AuthenticateCallbackHandler {
    private static final String EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    private static final DateTimeFormatter AMZ_DATE = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'");

    private final Map<String, String> secrets = new HashMap<>();

    @Override
    public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
        for (AppConfigurationEntry e : entries) {
            Object ak = e.getOptions().get("accessKeyId");
            Object sk = e.getOptions().get("secretAccessKey");
            if (ak != null && sk != null) {
                secrets.put((String) ak, (String) sk);
            }
        }
    }

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        for (Callback c : callbacks) {
            if (c instanceof OAuthBearerValidatorCallback) {
                OAuthBearerValidatorCallback v = (OAuthBearerValidatorCallback) c;
                try {
                    v.token(validate(v.tokenValue()));
                } catch (Exception e) {
                    // The client gets the status; the reason goes to the broker's log.
                    System.err.println("MskIamValidator: token refused: " + e.getMessage());
                    v.error("invalid_token", null, null);
                }
            } else if (c instanceof OAuthBearerExtensionsValidatorCallback) {
                OAuthBearerExtensionsValidatorCallback x = (OAuthBearerExtensionsValidatorCallback) c;
                x.inputExtensions().map().keySet().forEach(x::valid);
            } else {
                throw new UnsupportedCallbackException(c);
            }
        }
    }

    private OAuthBearerToken validate(String token) throws Exception {
        String url = new String(Base64.getUrlDecoder().decode(token), StandardCharsets.UTF_8);
        URI u = URI.create(url);
        Map<String, String> q = new TreeMap<>();
        for (String kv : u.getRawQuery().split("&")) {
            int i = kv.indexOf('=');
            q.put(URLDecoder.decode(kv.substring(0, i), StandardCharsets.UTF_8),
                URLDecoder.decode(kv.substring(i + 1), StandardCharsets.UTF_8));
        }
        if (!"kafka-cluster:Connect".equals(q.get("Action"))) throw new Exception("Action is not kafka-cluster:Connect");
        if (!"AWS4-HMAC-SHA256".equals(q.get("X-Amz-Algorithm"))) throw new Exception("X-Amz-Algorithm is not AWS4-HMAC-SHA256");
        if (!"host".equals(q.get("X-Amz-SignedHeaders"))) throw new Exception("X-Amz-SignedHeaders is not host");
        String[] scope = q.getOrDefault("X-Amz-Credential", "").split("/");
        if (scope.length != 5 || !"kafka-cluster".equals(scope[3]) || !"aws4_request".equals(scope[4]))
            throw new Exception("X-Amz-Credential is not a kafka-cluster scope");
        String secret = secrets.get(scope[0]);
        if (secret == null) throw new Exception("unknown access key " + scope[0]);
        String amzDate = q.get("X-Amz-Date");
        Instant signed = LocalDateTime.parse(amzDate, AMZ_DATE).toInstant(ZoneOffset.UTC);
        Instant expires = signed.plusSeconds(Long.parseLong(q.get("X-Amz-Expires")));
        if (Instant.now().isAfter(expires)) throw new Exception("token expired at " + expires);
        if (!amzDate.startsWith(scope[1])) throw new Exception("X-Amz-Date is not the credential's day");

        StringBuilder cq = new StringBuilder();
        for (Map.Entry<String, String> e : q.entrySet()) {
            if (e.getKey().equals("X-Amz-Signature") || e.getKey().equals("User-Agent")) continue;
            if (cq.length() > 0) cq.append('&');
            cq.append(encode(e.getKey())).append('=').append(encode(e.getValue()));
        }
        String canonical = "GET\n/\n" + cq + "\nhost:" + u.getHost() + "\n\nhost\n" + EMPTY_SHA256;
        String stringToSign = "AWS4-HMAC-SHA256\n" + amzDate + "\n"
            + String.join("/", scope[1], scope[2], scope[3], scope[4]) + "\n" + hex(sha256(canonical));
        byte[] key = hmac(("AWS4" + secret).getBytes(StandardCharsets.UTF_8), scope[1]);
        key = hmac(key, scope[2]);
        key = hmac(key, scope[3]);
        key = hmac(key, scope[4]);
        String want = hex(hmac(key, stringToSign));
        if (!MessageDigest.isEqual(want.getBytes(StandardCharsets.UTF_8),
                q.getOrDefault("X-Amz-Signature", "").getBytes(StandardCharsets.UTF_8)))
            throw new Exception("signature does not match");

        String principal = scope[0];
        long start = signed.toEpochMilli();
        long lifetime = expires.toEpochMilli();
        return new OAuthBearerToken() {
            public String value() { return token; }
            public Set<String> scope() { return Collections.emptySet(); }
            public long lifetimeMs() { return lifetime; }
            public String principalName() { return principal; }
            public Long startTimeMs() { return start; }
        };
    }

    /** RFC 3986 percent-encoding, as SigV4's canonical query string wants it. */
    private static String encode(String s) {
        StringBuilder b = new StringBuilder();
        for (byte c : s.getBytes(StandardCharsets.UTF_8)) {
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~') {
                b.append((char) c);
            } else {
                b.append(String.format("%%%02X", c & 0xff));
            }
        }
        return b.toString();
    }

    private static byte[] sha256(String s) throws Exception {
        return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
    }

    private static byte[] hmac(byte[] key, String data) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        return mac.doFinal(data.getBytes(StandardCharsets.UTF_8));
    }

    private static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }

    @Override
    public void close() {}
}
