package bench;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * Restores a changelog topic into a KTable (persistent RocksDB store) and reports how fast.
 *
 * <p>{@code builder.table(topic)} with {@code topology.optimization=all} uses the topic itself as
 * the store's changelog (no second changelog topic). The application's group offsets are first
 * set to the topic's end, so on start Kafka Streams restores the whole topic into the store
 * through its restore path (what it does after losing its local state), then runs. Prints one
 * JSON line: restore seconds (from {@code start()} to the last partition's restore end), the
 * records restored, and the rows in the store once running (counted by iterating it).
 *
 * <p>Arguments: bootstrap topic application-id state-dir stream-threads
 */
public final class KTableRestore {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1], appId = args[2], stateDir = args[3];
    int threads = Integer.parseInt(args[4]);
    int partitions = commitEndOffsets(bootstrap, topic, appId);

    StreamsBuilder builder = new StreamsBuilder();
    builder.table(
        topic,
        Consumed.with(Serdes.Bytes(), Serdes.ByteArray()),
        Materialized.<Bytes, byte[]>as(Stores.persistentKeyValueStore("table"))
            .withKeySerde(Serdes.Bytes())
            .withValueSerde(Serdes.ByteArray()));
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
    props.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
    KafkaStreams streams = new KafkaStreams(builder.build(props), props);

    CountDownLatch restored = new CountDownLatch(partitions);
    CountDownLatch running = new CountDownLatch(1);
    AtomicLong records = new AtomicLong();
    AtomicLong restoreEndNanos = new AtomicLong();
    Set<TopicPartition> ended = ConcurrentHashMap.newKeySet();
    streams.setGlobalStateRestoreListener(new StateRestoreListener() {
      @Override
      public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

      @Override
      public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {
        records.addAndGet(n);
      }

      @Override
      public void onRestoreEnd(TopicPartition tp, String store, long total) {
        if (ended.add(tp)) {
          restoreEndNanos.set(System.nanoTime());
          restored.countDown();
        }
      }
    });
    streams.setStateListener((now, before) -> {
      if (now == KafkaStreams.State.RUNNING) running.countDown();
    });
    long started = System.nanoTime();
    streams.start();
    if (!restored.await(3600, TimeUnit.SECONDS)) throw new IllegalStateException("no restore end");
    double restoreSeconds = (restoreEndNanos.get() - started) / 1e9;
    running.await(600, TimeUnit.SECONDS);
    double runningSeconds = (System.nanoTime() - started) / 1e9;
    ReadOnlyKeyValueStore<Bytes, byte[]> store = streams.store(
        StoreQueryParameters.fromNameAndType("table", QueryableStoreTypes.keyValueStore()));
    long rows = 0;
    try (KeyValueIterator<Bytes, byte[]> all = store.all()) {
      while (all.hasNext()) {
        all.next();
        rows++;
      }
    }
    streams.close(Duration.ofSeconds(30));
    System.out.printf(
        "{\"seconds\": %.3f, \"running_s\": %.3f, \"restored\": %d, \"rows\": %d}%n",
        restoreSeconds, runningSeconds, records.get(), rows);
  }

  /** Sets the application's group offsets to the end of every partition; returns their count. */
  private static int commitEndOffsets(String bootstrap, String topic, String appId)
      throws Exception {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    try (Admin admin = Admin.create(props)) {
      int partitions = admin.describeTopics(Set.of(topic)).allTopicNames().get()
          .get(topic).partitions().size();
      Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
      for (int p = 0; p < partitions; p++) latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
      Map<TopicPartition, OffsetAndMetadata> ends = new HashMap<>();
      admin.listOffsets(latest).all().get()
          .forEach((tp, info) -> ends.put(tp, new OffsetAndMetadata(info.offset())));
      admin.alterConsumerGroupOffsets(appId, ends).all().get();
      return partitions;
    }
  }
}
