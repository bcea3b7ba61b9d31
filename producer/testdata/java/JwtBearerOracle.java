import java.util.List;
import java.util.Map;
import java.util.Properties;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever;

/**
 * Asks Kafka's own JwtBearerJwtRetriever (KIP-1139) for a token, configured by the producer
 * properties given as KEY VALUE pairs: the token endpoint (sasl.oauthbearer.token.endpoint.url,
 * the test's server, which keeps the request) receives the JWT bearer grant's request as the
 * Java client sends it. Prints the token.
 */
public class JwtBearerOracle {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", "127.0.0.1:9");
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "OAUTHBEARER");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;");
        for (int i = 0; i + 1 < args.length; i += 2) p.put(args[i], args[i + 1]);
        System.setProperty("org.apache.kafka.sasl.oauthbearer.allowed.urls", p.getProperty("sasl.oauthbearer.token.endpoint.url"));
        String files = "";
        for (String k : new String[]{"sasl.oauthbearer.assertion.private.key.file", "sasl.oauthbearer.assertion.template.file", "sasl.oauthbearer.assertion.file"})
            if (p.getProperty(k) != null) files += (files.isEmpty() ? "" : ",") + p.getProperty(k);
        System.setProperty("org.apache.kafka.sasl.oauthbearer.allowed.files", files);
        Map<String, ?> configs = new ProducerConfig(p).values();
        List<AppConfigurationEntry> entries = JaasContext.loadClientContext(configs).configurationEntries();
        JwtBearerJwtRetriever r = new JwtBearerJwtRetriever();
        r.configure(configs, "OAUTHBEARER", entries);
        System.out.println(r.retrieve());
        r.close();
    }
}
