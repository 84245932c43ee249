// Loaded with `node --import` into a child process of a test (kafkaRouteEnv): its Kafka
// connections go where REQUESTER_TEST_KAFKA_ROUTE says (see kafka-route.ts).
import { KAFKA_ROUTE_VARIABLE, parseBrokerRoutes, routeConnections } from './kafka-route.ts';

const routes = process.env[KAFKA_ROUTE_VARIABLE];
if (routes) routeConnections(parseBrokerRoutes(routes));
