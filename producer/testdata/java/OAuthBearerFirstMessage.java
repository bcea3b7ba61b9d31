import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import javax.security.auth.callback.Callback;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.security.auth.SaslExtensionsCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerClientInitialResponse;

/**
 * Prints, in hex, the first OAUTHBEARER message the Java client sends for a token (in a file)
 * and a sasl.jaas.config: its SASL extensions come from OAuthBearerLoginCallbackHandler
 * answering a SaslExtensionsCallback (the extension_NAME options), the message from
 * OAuthBearerClientInitialResponse.toBytes, as OAuthBearerSaslClient builds it.
 *
 * Usage: OAuthBearerFirstMessage JAAS TOKEN_FILE
 */
public class OAuthBearerFirstMessage {
    public static void main(String[] args) throws Exception {
        String jaas = args[0];
        String tokenFile = args[1];
        String url = Paths.get(tokenFile).toUri().toString();
        System.setProperty("org.apache.kafka.sasl.oauthbearer.allowed.urls", url);
        String token = new String(Files.readAllBytes(Paths.get(tokenFile)), StandardCharsets.UTF_8).trim();

        Properties p = new Properties();
        p.put("bootstrap.servers", "127.0.0.1:9");
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "OAUTHBEARER");
        p.put("sasl.oauthbearer.token.endpoint.url", url);
        p.put("sasl.jaas.config", jaas);
        Map<String, ?> configs = new ProducerConfig(p).values();
        List<AppConfigurationEntry> entries = JaasContext.loadClientContext(configs).configurationEntries();

        OAuthBearerLoginCallbackHandler handler = new OAuthBearerLoginCallbackHandler();
        handler.configure(configs, "OAUTHBEARER", entries);
        SaslExtensionsCallback extensions = new SaslExtensionsCallback();
        handler.handle(new Callback[] {extensions});
        byte[] msg = new OAuthBearerClientInitialResponse(token, extensions.extensions()).toBytes();
        System.out.println(HexFormat.of().formatHex(msg));
    }
}
