import "reflect-metadata";
import { afterAll } from "vitest";
import { closeStateStores } from "./harness/state.js";

afterAll(closeStateStores);
