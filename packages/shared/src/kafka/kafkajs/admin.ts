import { setTimeout as sleep } from 'node:timers/promises';
import type { Admin } from 'kafkajs';
import { RequesterError } from '../../errors/index.ts';
import type { KafkaAdmin, PartitionOffsets, TopicSpec } from '../types.ts';
import { isRetriableKafkaError } from './errors.ts';

export class KafkajsAdmin implements KafkaAdmin {
  private readonly admin: Admin;

  constructor(admin: Admin) {
    this.admin = admin;
  }

  connect(): Promise<void> {
    return this.admin.connect();
  }

  disconnect(): Promise<void> {
    return this.admin.disconnect();
  }

  listTopics(): Promise<string[]> {
    return this.admin.listTopics();
  }

  async deleteTopics(topics: string[]): Promise<void> {
    if (topics.length > 0) await this.admin.deleteTopics({ topics, timeout: 30_000 });
  }

  /**
   * Creates the topics that are missing and returns once every partition of `topics` has a leader.
   * A broker that just started (or just created a topic) may answer retriable errors while it
   * loads, so creation is asked again. Several processes may start at once: when another one
   * created a topic first, kafkajs returns without waiting for its leaders, so they are awaited
   * here whoever created them.
   */
  async ensureTopics(topics: TopicSpec[], patienceMs = 30_000): Promise<string[]> {
    const deadline = Date.now() + patienceMs;
    const created: string[] = [];
    for (;;) {
      const existing = new Set(await this.admin.listTopics());
      const missing = topics.filter((t) => !existing.has(t.topic));
      if (missing.length === 0) break;
      try {
        if (await this.admin.createTopics({ topics: missing, waitForLeaders: true })) {
          created.push(...missing.map((t) => t.topic));
          break;
        }
        // false: another process created them meanwhile; list again, then await their leaders.
      } catch (err) {
        if (!isRetriableKafkaError(err) || Date.now() > deadline) throw err;
        await sleep(250);
      }
    }
    await this.awaitLeaders(
      topics.map((t) => t.topic),
      deadline,
    );
    return created;
  }

  /**
   * Returns once every partition of `topics` is served by its leader; retriable errors are asked
   * again. Metadata may name a leader before that broker has loaded the partition (it then answers
   * "not the leader"), so readiness is proven by ListOffsets succeeding on every partition.
   */
  private async awaitLeaders(topics: string[], deadline: number): Promise<void> {
    for (;;) {
      try {
        const { topics: metadata } = await this.admin.fetchTopicMetadata({ topics });
        const led = metadata.every(
          (t) =>
            t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0 && p.partitionErrorCode === 0),
        );
        if (led) {
          await Promise.all(topics.map((topic) => this.admin.fetchTopicOffsets(topic)));
          return;
        }
      } catch (err) {
        if (!isRetriableKafkaError(err)) throw err;
      }
      if (Date.now() > deadline)
        throw new RequesterError(
          'dependency_unavailable',
          `Kafka elected no leader for ${topics.join(', ')}`,
        );
      await sleep(100);
    }
  }

  /**
   * Asked again on retriable errors for up to `patienceMs`: right after a topic is created (or a
   * broker restarted) ListOffsets may answer "not the leader" until leadership settles.
   */
  async topicOffsets(topic: string, patienceMs = 5_000): Promise<PartitionOffsets[]> {
    const deadline = Date.now() + patienceMs;
    for (let attempt = 1; ; attempt++) {
      try {
        const offsets = await this.admin.fetchTopicOffsets(topic);
        return offsets.map(({ partition, low, high }) => ({ partition, low, high }));
      } catch (err) {
        if (!isRetriableKafkaError(err) || Date.now() > deadline) throw err;
        await sleep(Math.min(100 * attempt, 1_000));
      }
    }
  }

  async committedOffsets(
    groupId: string,
    topic: string,
  ): Promise<Array<{ partition: number; offset: string }>> {
    const [committed] = await this.admin.fetchOffsets({ groupId, topics: [topic] });
    return (committed?.partitions ?? []).map(({ partition, offset }) => ({ partition, offset }));
  }

  async deleteRecordsBefore(topic: string, partition: number, offset: string): Promise<void> {
    // kafkajs looks the partition's leader up in metadata it must have loaded first.
    await this.admin.fetchTopicMetadata({ topics: [topic] });
    await this.admin.deleteTopicRecords({ topic, partitions: [{ partition, offset }] });
  }

  async ping(topic: string): Promise<void> {
    await this.admin.fetchTopicMetadata({ topics: [topic] });
  }
}
