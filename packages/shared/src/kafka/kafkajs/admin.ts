import type { Admin } from 'kafkajs';
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

  /**
   * A broker that just started (or just created a topic) may answer retriable errors while it
   * loads — e.g. "does not host this topic-partition" while kafkajs waits for leaders — so
   * creation is asked again (an existing topic is no error).
   */
  async ensureTopics(topics: TopicSpec[], patienceMs = 30_000): Promise<string[]> {
    const existing = new Set(await this.admin.listTopics());
    const missing = topics.filter((t) => !existing.has(t.topic));
    if (missing.length === 0) return [];
    const deadline = Date.now() + patienceMs;
    for (;;) {
      try {
        await this.admin.createTopics({ topics: missing, waitForLeaders: true });
        return missing.map((t) => t.topic);
      } catch (err) {
        if (!isRetriableKafkaError(err) || Date.now() > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
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
        await new Promise((resolve) => setTimeout(resolve, Math.min(100 * attempt, 1_000)));
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

  async ping(): Promise<void> {
    await this.admin.describeCluster();
  }
}
