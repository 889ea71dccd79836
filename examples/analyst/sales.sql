-- The analyst example's data: quarterly sales by region.
CREATE TABLE sales (region TEXT NOT NULL, quarter TEXT NOT NULL, amount REAL NOT NULL);
INSERT INTO sales (region, quarter, amount) VALUES
  ('north', '2026-Q1', 120500), ('north', '2026-Q2', 131200), ('north', '2026-Q3', 150900),
  ('south', '2026-Q1', 98000),  ('south', '2026-Q2', 97100),  ('south', '2026-Q3', 101300),
  ('east',  '2026-Q1', 143000), ('east',  '2026-Q2', 139800), ('east',  '2026-Q3', 137200),
  ('west',  '2026-Q1', 76400),  ('west',  '2026-Q2', 84100),  ('west',  '2026-Q3', 95800);
