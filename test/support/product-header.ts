/** A stored product header as ProductStore writes it (ProductHeaderRecord): the base the header tests vary. */
export const validHeader = {
  v: 1,
  productId: "prd_1",
  projectId: "proj",
  name: "A product",
  phase: "executing",
  progress: { total: 3, completed: 1, running: 1, failed: 0, pending: 1 },
  createdAt: "2026-01-01T00:00:00.000Z",
  updatedAt: "2026-01-01T00:00:01.000Z",
};
