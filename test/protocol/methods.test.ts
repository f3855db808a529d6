/**
 * The method table covers exactly the methods of PROTOCOL.md sections 4, 5 and 7 (lists hard-coded from that file),
 * serves extension methods under both spellings, and types its handlers (`ParamsOf`, `ResultOf`, …).
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import type { z } from "zod";
import type { McpServer, StopReason } from "../../protocol/acp.js";
import type { Mutation, Phase, TaskState, TaskStatus } from "../../protocol/common.js";
import {
  acpMethods,
  acpServerNotifications,
  clientNotifications,
  extensionMethodNames,
  extensionNotificationNames,
  findServerMethod,
  hostRequests,
  outboundName,
  productMethods,
  productNotifications,
  serverMethods,
  type HostParamsOf,
  type HostResultOf,
  type NotificationParams,
  type ParamsInputOf,
  type ParamsOf,
  type ResultOf,
  type ServerMethodName,
} from "../../protocol/methods.js";
import { ACP_METHODS, PRODUCT_METHODS, PRODUCT_NOTIFICATIONS } from "../support/protocol-names.js";

// PROTOCOL.md section 4 (authenticate is not served: authMethods is []).

// PROTOCOL.md section 5, method table.

// PROTOCOL.md section 5, notifications table.

// PROTOCOL.md section 7, plus ACP's server → client permission request.
/** PROTOCOL.md section 6, in table order. */
const GOAL_METHODS = [
  "x/goal.start",
  "x/goal.status",
  "x/goal.list",
  "x/goal.pause",
  "x/goal.resume",
  "x/goal.stop",
  "x/goal.edit",
  "x/goal.message",
];

/** PROTOCOL.md section 6, notifications. */
const GOAL_NOTIFICATIONS = [
  "x/goal.started",
  "x/goal.phaseStarted",
  "x/goal.phaseAssessed",
  "x/goal.statusChanged",
  "x/goal.ended",
];

const HOST_REQUESTS = [
  "runState/get",
  "runState/put",
  "runState/delete",
  "runState/list",
  "runState/appendEvents",
  "runState/readEvents",
  "runState/deleteStream",
  "session/request_permission",
];

// "allowed in" column of PROTOCOL.md section 5 (undefined: "—").
const ALLOWED_IN: Record<string, readonly Phase[] | undefined> = {
  "product.plan": undefined,
  "product.message": ["planning", "awaiting_confirmation", "executing", "paused"],
  "product.confirm": ["awaiting_confirmation"],
  "product.status": ["planning", "awaiting_confirmation", "executing", "paused", "completed", "failed", "cancelled"],
  "product.list": undefined,
  "product.pause": ["executing", "paused"],
  "product.resume": ["paused", "executing"],
  "product.cancel": ["planning", "awaiting_confirmation", "executing", "paused"],
  "product.checkpoint": ["executing", "paused", "completed", "failed"],
  "product.checkpoints": [
    "planning",
    "awaiting_confirmation",
    "executing",
    "paused",
    "completed",
    "failed",
    "cancelled",
  ],
  "product.rollback": ["executing", "paused", "completed", "failed"],
  "product.replayTask": ["executing", "paused", "completed", "failed"],
  "product.mutate": ["awaiting_confirmation", "executing", "paused"],
  "product.delete": ["planning", "awaiting_confirmation", "executing", "paused", "completed", "failed", "cancelled"],
};

describe("method table", () => {
  it("declares exactly the ACP methods of section 4, as non-extension methods", () => {
    expect(acpMethods.map((m) => m.method)).toEqual(ACP_METHODS);
    expect(acpMethods.every((m) => !m.extension)).toBe(true);
  });

  it("declares exactly the product methods of section 5, as extension methods", () => {
    expect(productMethods.map((m) => m.method)).toEqual(PRODUCT_METHODS);
    expect(productMethods.every((m) => m.extension)).toBe(true);
  });

  it("serves the union of both, with no duplicate name", () => {
    const names = serverMethods.map((m) => m.method);
    expect(names).toEqual([...ACP_METHODS, ...PRODUCT_METHODS, ...GOAL_METHODS]);
    expect(new Set(names).size).toBe(names.length);
  });

  it("gives each product method the allowed phases of the section 5 table", () => {
    expect(Object.fromEntries(productMethods.map((m) => [m.method, m.allowedIn]))).toEqual(ALLOWED_IN);
  });

  it("declares every notification and server → client request", () => {
    expect(productNotifications.map((n) => n.method)).toEqual(PRODUCT_NOTIFICATIONS);
    expect(productNotifications.every((n) => n.extension)).toBe(true);
    expect(clientNotifications.map((n) => n.method)).toEqual(["session/cancel"]);
    expect(acpServerNotifications.map((n) => n.method)).toEqual(["session/update"]);
    expect(hostRequests.map((r) => r.method)).toEqual(HOST_REQUESTS);
    expect(hostRequests.filter((r) => !r.extension).map((r) => r.method)).toEqual(["session/request_permission"]);
  });

  it("gives every entry a one-sentence-or-more summary", () => {
    const all = [
      ...serverMethods,
      ...clientNotifications,
      ...acpServerNotifications,
      ...productNotifications,
      ...hostRequests,
    ];
    expect(all.filter((m) => m.summary.trim().length < 10).map((m) => m.method)).toEqual([]);
  });

  it("lists the extension names initialize advertises", () => {
    expect(extensionMethodNames).toEqual([...PRODUCT_METHODS, ...GOAL_METHODS]);
    expect(extensionNotificationNames).toEqual([...PRODUCT_NOTIFICATIONS, ...GOAL_NOTIFICATIONS]);
  });
});

describe("findServerMethod", () => {
  it("finds an extension method under both spellings (PROTOCOL.md section 2)", () => {
    expect(findServerMethod("product.plan")?.method).toBe("product.plan");
    expect(findServerMethod("_product.plan")?.method).toBe("product.plan");
  });

  it("finds ACP methods under their name only", () => {
    expect(findServerMethod("session/new")?.method).toBe("session/new");
    expect(findServerMethod("_session/new")).toBeUndefined();
  });

  it("finds nothing for unknown names, notifications or server → client requests", () => {
    expect(findServerMethod("product.nope")).toBeUndefined();
    expect(findServerMethod("__product.plan")).toBeUndefined();
    expect(findServerMethod("session/cancel")).toBeUndefined();
    expect(findServerMethod("runState/get")).toBeUndefined();
  });
});

describe("outboundName", () => {
  it("prefixes extension messages only when the client asked for it", () => {
    const taskStatus = productNotifications.find((n) => n.method === "product.taskStatus");
    const update = acpServerNotifications[0];
    if (!taskStatus) throw new Error("product.taskStatus missing");
    expect(outboundName(taskStatus, "")).toBe("product.taskStatus");
    expect(outboundName(taskStatus, "_")).toBe("_product.taskStatus");
    expect(outboundName(update, "_")).toBe("session/update");
  });
});

describe("typed maps", () => {
  it("resolve params, results and notification params from a method name", () => {
    expectTypeOf<ParamsOf<"product.plan">["cwd"]>().toEqualTypeOf<string>();
    expectTypeOf<ParamsOf<"product.plan">["allowedAgents"]>().toEqualTypeOf<string[] | undefined>();
    expectTypeOf<ParamsOf<"product.mutate">["mutations"]>().toEqualTypeOf<Mutation[]>();
    expectTypeOf<ParamsOf<"session/new">["mcpServers"]>().toEqualTypeOf<McpServer[]>();
    expectTypeOf<ParamsInputOf<"session/new">["mcpServers"]>().toEqualTypeOf<z.input<typeof McpServer>[] | null>();
    expectTypeOf<ResultOf<"product.status">["dropped"]>().toEqualTypeOf<number>();
    expectTypeOf<ResultOf<"product.status">["tasks"]>().toEqualTypeOf<TaskState[]>();
    expectTypeOf<ResultOf<"product.confirm">["ok"]>().toEqualTypeOf<true>();
    expectTypeOf<ResultOf<"session/prompt">["stopReason"]>().toEqualTypeOf<StopReason>();
    expectTypeOf<ResultOf<"initialize">["protocolVersion"]>().toEqualTypeOf<1>();
    expectTypeOf<NotificationParams<"product.taskStatus">["status"]>().toEqualTypeOf<TaskStatus>();
    expectTypeOf<NotificationParams<"product.completed">["phase"]>().toEqualTypeOf<"completed" | "failed">();
    expectTypeOf<NotificationParams<"session/cancel">["sessionId"]>().toEqualTypeOf<string>();
    expectTypeOf<HostParamsOf<"runState/put">["expectedRevision"]>().toEqualTypeOf<number | null>();
    expectTypeOf<HostResultOf<"runState/get">["record"]>().toEqualTypeOf<{
      value: unknown;
      revision: number;
      updatedAt: string;
    } | null>();
    expectTypeOf<"product.plan">().toExtend<ServerMethodName>();
    expectTypeOf<"product.nope">().not.toExtend<ServerMethodName>();
    // Runtime side of the same contract: the schema behind ParamsOf<"product.plan"> is the table's.
    expect(findServerMethod("product.plan")?.params).toBe(productMethods[0].params);
  });
});
