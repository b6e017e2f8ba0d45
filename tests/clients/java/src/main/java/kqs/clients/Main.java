package kqs.clients;

import java.net.URI;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs the Java client scenarios against a KQS gateway in one JVM and prints one JSON object
 * per scenario on its own line, prefixed with {@code RESULT }. The Python test
 * (tests/clients/test_clients_java.py) asserts on what each scenario observed.
 *
 * <p>Arguments: {@code <sqs endpoint> <queue name prefix> <s3 endpoint> <s3 bucket>
 * [scenario...]}. A scenario that throws prints {@code {"scenario": ..., "error": ...}} and the
 * others still run.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    URI endpoint = URI.create(args[0]);
    String prefix = args[1];
    URI s3Endpoint = URI.create(args[2]);
    String bucket = args[3];
    List<String> scenarios = new ArrayList<>();
    for (int i = 4; i < args.length; i++) {
      scenarios.add(args[i]);
    }
    if (scenarios.isEmpty()) {
      scenarios = List.of("sdk-sync", "sdk-async-batch", "jms", "extended");
    }
    for (String scenario : scenarios) {
      Map<String, Object> result = new LinkedHashMap<>();
      result.put("scenario", scenario);
      long started = System.nanoTime();
      try {
        switch (scenario) {
          case "sdk-sync" -> SdkScenarios.sync(endpoint, prefix, result);
          case "sdk-async-batch" -> SdkScenarios.asyncBatch(endpoint, prefix, result);
          case "jms" -> JmsScenario.run(endpoint, prefix, result);
          case "extended" -> ExtendedScenario.run(endpoint, prefix, s3Endpoint, bucket, result);
          default -> throw new IllegalArgumentException("unknown scenario " + scenario);
        }
      } catch (Throwable e) {
        java.io.StringWriter trace = new java.io.StringWriter();
        e.printStackTrace(new java.io.PrintWriter(trace));
        result.put("error", trace.toString());
      }
      result.put("seconds", (System.nanoTime() - started) / 1e9);
      System.out.println("RESULT " + Json.write(result));
      System.out.flush();
    }
  }
}
